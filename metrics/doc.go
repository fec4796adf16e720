// Package metrics exports a bulkmove job to Prometheus and says what limits
// it.
//
// The hot path never touches Prometheus: streams update plain atomics
// (stream.Counters) and the job's totals (Job); a Collector reads them at
// scrape time. A Verdict, recomputed every second over a sliding window of
// samples, names the resource that limits the job (source read, network,
// receiver write, sender CPU, receiver CPU) from where each stream's time
// goes, and whether one more stream would likely help.
package metrics
