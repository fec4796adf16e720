// Package metrics will hold bulkmove's Prometheus collectors, the exporter,
// push and textfile output, and the saturation analysis that names the
// bottleneck (issue 4). Until then the sender reports per-stream batches,
// files, bytes and finish times through stream.Pool.Stats, printed by -v.
package metrics
