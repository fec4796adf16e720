package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmove/bulkmove/receive/extract"
)

// Receiver exports what a receiver (an agent) has written. Set it once the
// receiver is open; until then it exports zeros.
type Receiver struct {
	recv atomic.Pointer[extract.Receiver]
}

// Set names the receiver to export.
func (r *Receiver) Set(x *extract.Receiver) { r.recv.Store(x) }

var (
	dAgentBytes   = newDesc("receiver_written_bytes_total", "File data this receiver wrote.", prometheus.CounterValue)
	dAgentFiles   = newDesc("receiver_written_files_total", "Entries this receiver installed.", prometheus.CounterValue)
	dAgentSkipped = newDesc("receiver_skipped_files_total", "Files this receiver found up to date.", prometheus.CounterValue)
	dAgentErrors  = newDesc("receiver_errors_total", "Entries this receiver could not install.", prometheus.CounterValue)
	dAgentWrite   = newDesc("receiver_write_seconds_total", "Time this receiver spent writing.", prometheus.CounterValue)
	dAgentFsync   = newDesc("receiver_fsync_seconds_total", "Time this receiver spent in fsync.", prometheus.CounterValue)
	agentDescs    = []desc{dAgentBytes, dAgentFiles, dAgentSkipped, dAgentErrors, dAgentWrite, dAgentFsync}
)

// Describe implements prometheus.Collector.
func (r *Receiver) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range agentDescs {
		ch <- d.d
	}
}

// Collect implements prometheus.Collector.
func (r *Receiver) Collect(ch chan<- prometheus.Metric) {
	var t struct{ files, bytes, skipped, errs, write, fsync int64 }
	if x := r.recv.Load(); x != nil {
		tt := x.Totals()
		t.files, t.bytes, t.skipped, t.errs, t.write, t.fsync = tt.Files, tt.Bytes, tt.Skipped, tt.Errors, tt.WriteNanos, tt.FsyncNanos
	}
	for _, m := range []struct {
		d desc
		v float64
	}{{dAgentBytes, float64(t.bytes)}, {dAgentFiles, float64(t.files)}, {dAgentSkipped, float64(t.skipped)},
		{dAgentErrors, float64(t.errs)}, {dAgentWrite, secs(t.write)}, {dAgentFsync, secs(t.fsync)}} {
		ch <- prometheus.MustNewConstMetric(m.d.d, m.d.kind, m.v)
	}
}

// Registry returns a registry with the receiver's metrics, build
// information and the standard Go and process collectors.
func (r *Receiver) Registry(version string) *prometheus.Registry {
	return newRegistry(version, r, nil)
}
