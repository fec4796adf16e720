package metrics

import "time"

// Window is a rate smoothed over a span of time: the change of a counter
// between its latest sample and the newest sample at least the span old.
// A rate over each tick of a display swings between 0 and bursts (under
// --bwlimit, say, data leaves in bursts); over a few seconds it reads
// steady. Not safe for concurrent use.
type Window struct {
	span    time.Duration
	samples []windowSample
}

type windowSample struct {
	at time.Time
	v  float64
}

// NewWindow smooths over span (bulkmove's display: 5 s).
func NewWindow(span time.Duration) *Window { return &Window{span: span} }

// Add records the counter's value v at time at and returns the rate per
// second over the window; 0 until two samples apart in time.
func (w *Window) Add(at time.Time, v float64) float64 {
	w.samples = append(w.samples, windowSample{at, v})
	// Drop the oldest while the next one is still a whole span old.
	drop := 0
	for drop+1 < len(w.samples) && at.Sub(w.samples[drop+1].at) >= w.span {
		drop++
	}
	w.samples = w.samples[drop:]
	first := w.samples[0]
	dt := at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return (v - first.v) / dt
}
