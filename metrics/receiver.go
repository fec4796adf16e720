package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bulkmove/bulkmove/wire"
)

// Totaler is what a receiving daemon's receiver reports: what it has
// written so far (the receiving side's extractor implements it).
type Totaler interface {
	Totals() wire.Totals
}

// Receiver exports what a receiving daemon (bulkmove --agent, bulkmove
// serve) has written at the destination. Set it once the receiver is
// open; until then it exports zeros.
//
// Its series are named bulkmove_destination_*, not bulkmove_receiver_*:
// those are the job's, per stream, as the receivers report them to the
// sender in their acknowledgements (Job), and one name has one label set.
type Receiver struct {
	recv atomic.Pointer[totaler]
}

// totaler boxes a Totaler so that it can be swapped atomically.
type totaler struct{ Totaler }

// Set names the receiver to export.
func (r *Receiver) Set(x Totaler) { r.recv.Store(&totaler{x}) }

var (
	dDestBytes   = newDesc("destination_written_bytes_total", "File data this receiver wrote.", prometheus.CounterValue)
	dDestFiles   = newDesc("destination_written_files_total", "Entries this receiver installed.", prometheus.CounterValue)
	dDestSkipped = newDesc("destination_skipped_files_total", "Files this receiver found up to date.", prometheus.CounterValue)
	dDestErrors  = newDesc("destination_errors_total", "Entries this receiver could not install.", prometheus.CounterValue)
	dDestWrite   = newDesc("destination_write_seconds_total", "Time this receiver spent writing.", prometheus.CounterValue)
	dDestFsync   = newDesc("destination_fsync_seconds_total", "Time this receiver spent in fsync.", prometheus.CounterValue)
	destDescs    = []desc{dDestBytes, dDestFiles, dDestSkipped, dDestErrors, dDestWrite, dDestFsync}
)

// Describe implements prometheus.Collector.
func (r *Receiver) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range destDescs {
		ch <- d.d
	}
}

// Collect implements prometheus.Collector.
func (r *Receiver) Collect(ch chan<- prometheus.Metric) {
	var t wire.Totals
	if x := r.recv.Load(); x != nil {
		t = x.Totals()
	}
	for _, m := range []struct {
		d desc
		v float64
	}{{dDestBytes, float64(t.Bytes)}, {dDestFiles, float64(t.Files)}, {dDestSkipped, float64(t.Skipped)},
		{dDestErrors, float64(t.Errors)}, {dDestWrite, secs(t.WriteNanos)}, {dDestFsync, secs(t.FsyncNanos)}} {
		ch <- prometheus.MustNewConstMetric(m.d.d, m.d.kind, m.v)
	}
}

// Registry returns a registry with the receiver's metrics, build
// information and the standard Go and process collectors.
func (r *Receiver) Registry(version string) *prometheus.Registry {
	return newRegistry(version, nil, true, r)
}
