// Package metrics exports a bulkmove job to Prometheus and says what limits
// it.
//
// Package metrics imports neither end of a move: the sending side and the
// receiving side report into it. The hot path never touches Prometheus:
// the sender updates plain atomics, each stream's Stream (which the
// sending side calls its Counters) and the job's totals (Job); a receiving
// daemon hands its receiver to Receiver as a Totaler. The collectors read
// them at scrape time. Every bulkmove_* metric is declared here, once, with
// one label set (declared_test.go holds to it), so that the collectors of a
// job, sending and receiving side, can share one registry.
//
// A Verdict, recomputed every second over a sliding window of samples,
// names the resource that limits the job (source read, network, receiver
// write, sender CPU, receiver CPU) from where each stream's time goes, and
// whether one more stream would likely help.
//
// It sits above the wire (for the receiver's totals) and the internal
// helpers; the engine and the daemons import it.
package metrics
