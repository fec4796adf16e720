package metrics

import (
	"runtime"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// AutoJ is what -j auto does to a job's streams, for the metrics.
type AutoJ struct {
	Target atomic.Int64 // the streams it aims at (with a fixed -j: that)
	// InUse is how many of the job's Streams are or were used; those
	// beyond are spare counters for the streams -j auto may add (0: all).
	InUse   atomic.Int64
	added   atomic.Int64
	removed atomic.Int64
	stopped atomic.Int64
}

// Decided counts one decision: "add", "remove" or "stop".
func (a *AutoJ) Decided(action string) {
	switch action {
	case "add":
		a.added.Add(1)
	case "remove":
		a.removed.Add(1)
	default:
		a.stopped.Add(1)
	}
}

// Decisions are the decisions counted so far: streams added, removed,
// and stops (no change).
func (a *AutoJ) Decisions() (added, removed, stopped int64) {
	return a.added.Load(), a.removed.Load(), a.stopped.Load()
}

// SetDecisions sets the counts Decisions reads: another process's (a
// remote-to-remote move's box1, on its control host).
func (a *AutoJ) SetDecisions(added, removed, stopped int64) {
	a.added.Store(added)
	a.removed.Store(removed)
	a.stopped.Store(stopped)
}

var (
	dStreamsTarget = newDesc("streams_target", "The number of streams the job aims at: -j, or what -j auto decided last.", prometheus.GaugeValue)
	dAutoDecisions = newDesc("streams_decisions_total", "Decisions of -j auto: add streams, remove streams, stop (no change).", prometheus.CounterValue, "action")
)

func (j *Job) collectAuto(m func(d desc, v float64, labels ...string)) {
	m(dStreamsTarget, float64(j.AutoJ.Target.Load()))
	m(dAutoDecisions, float64(j.AutoJ.added.Load()), "add")
	m(dAutoDecisions, float64(j.AutoJ.removed.Load()), "remove")
	m(dAutoDecisions, float64(j.AutoJ.stopped.Load()), "stop")
}

// StreamsInUse are the counters of the streams that are or were at work
// (not the spare ones of -j auto).
func (j *Job) StreamsInUse() []*Stream {
	if n := int(j.AutoJ.InUse.Load()); n > 0 && n < len(j.Streams) {
		return j.Streams[:n]
	}
	return j.Streams
}

// Mark is a snapshot of the job's counters: VerdictSince judges the window
// from it to now (the -j auto controller's own windows).
type Mark struct{ s sample }

// Mark takes a snapshot.
func (j *Job) Mark() Mark { return Mark{j.snapshot()} }

// VerdictSince is the bottleneck verdict over the window since m; local
// as for Watch.
func (j *Job) VerdictSince(m Mark, local bool) *Verdict {
	return decide(m.s, j.snapshot(), runtime.NumCPU(), local)
}
