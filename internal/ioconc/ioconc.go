// Package ioconc decides how many filesystem operations to run at once, and
// runs them.
//
// On a local disk or a tmpfs an open, a stat or a create costs microseconds
// of CPU, and doing them from many goroutines only adds scheduling. On NFS,
// Lustre or GPFS each one is a round trip to a server (a millisecond or
// more) and a single caller spends its time waiting: only many operations in
// flight hide that latency. A Gauge measures the latency of the operations
// it is told about and says how many to run at once: one while they are
// fast, more as they get slower (enough that the waits of the others cover
// each one's latency), up to a limit; or a fixed number.
package ioconc

import (
	"sync"
	"sync/atomic"
	"time"
)

// Defaults.
const (
	// DefaultMax is the most operations in flight that auto chooses, per
	// side. Measured over a 1 ms FUSE filesystem: 8 at once 2.6 s, 32 at
	// once 0.8 s for the same 1,000 files.
	DefaultMax = 64
	// Slow is the latency above which an operation is taken to be waiting
	// on a device or a server, not on the CPU: a cached open or stat takes
	// a few microseconds.
	Slow = 50 * time.Microsecond
	// perWorker is the latency one more operation in flight covers: the
	// width is latency/perWorker.
	perWorker = 25 * time.Microsecond
)

// Gauge tracks the latency of one filesystem's operations and chooses a
// width. Safe for
// concurrent use. The zero value is an auto gauge with DefaultMax; a nil
// *Gauge always answers 1.
type Gauge struct {
	fixed int // > 0: always this width
	max   int // auto: at most this width

	// The latency is the smallest of each window of observations, averaged
	// over windows: a fast filesystem's operation that took long because
	// its goroutine waited for a CPU (a busy machine) does not make it
	// look slow; a slow filesystem is slow every time.
	mu     sync.Mutex
	n      int   // observations in the current window
	winMin int64 // their smallest
	lat    atomic.Int64

	tokensOnce sync.Once
	tokens     chan struct{} // Acquire and Release: Limit() of them
}

// window is the number of observations whose smallest counts.
const window = 8

// Acquire waits for one of the gauge's Limit() tokens: callers that run
// operations from several places at once (a reader pool per stream) hold
// one for each, so that the total in flight stays within the limit.
func (g *Gauge) Acquire() {
	if g == nil {
		return
	}
	g.tokensOnce.Do(func() { g.tokens = make(chan struct{}, g.Limit()) })
	g.tokens <- struct{}{}
}

// Release returns a token taken by Acquire.
func (g *Gauge) Release() {
	if g != nil {
		<-g.tokens
	}
}

// Auto returns a gauge that chooses a width from the measured latency, at
// most max (DefaultMax if max <= 0).
func Auto(max int) *Gauge {
	if max <= 0 {
		max = DefaultMax
	}
	return &Gauge{max: max}
}

// Fixed returns a gauge that always answers n (at least 1).
func Fixed(n int) *Gauge { return &Gauge{fixed: max(n, 1)} }

// Observe records the latency of one operation.
func (g *Gauge) Observe(d time.Duration) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.n == 0 || int64(d) < g.winMin {
		g.winMin = int64(d)
	}
	if g.n++; g.n == window {
		old := g.lat.Load()
		if old == 0 {
			g.lat.Store(g.winMin)
		} else {
			g.lat.Store(old + (g.winMin-old)/2)
		}
		g.n = 0
	}
	g.mu.Unlock()
}

// Since records the latency of an operation that started at start.
func (g *Gauge) Since(start time.Time) {
	if g != nil {
		g.Observe(time.Since(start))
	}
}

// sampleEvery is how many of a fast filesystem's operations a Sampler
// stands one timing for: two clock readings per open or stat are a
// measurable share of the CPU a small file costs, and a filesystem that
// turns slow still shows within window*sampleEvery operations.
const sampleEvery = 16

// Sampler says which operations to time: every one while its gauge has no
// measure yet or says they are slow, one in sampleEvery while they are
// fast. The zero value is ready; safe for concurrent use.
type Sampler struct{ n atomic.Uint32 }

// Next reports whether to time the next operation, as the number of
// operations its timing stands for (0: do not time it): for a caller that
// adds up time, that timing times the count is the estimate.
func (s *Sampler) Next(g *Gauge) int {
	n := s.n.Add(1)
	if n < sampleEvery {
		if l := g.Latency(); l > 0 && l < Slow {
			return 0
		}
	}
	s.n.Store(0)
	return int(n)
}

// Latency is the moving average of the operations observed.
func (g *Gauge) Latency() time.Duration {
	if g == nil {
		return 0
	}
	return time.Duration(g.lat.Load())
}

// Slow reports whether the operations wait on a device or server rather
// than on the CPU: it is what makes a high width pay off.
func (g *Gauge) Slow() bool { return g.Latency() >= Slow }

// Width is how many operations to run at once now.
func (g *Gauge) Width() int {
	switch {
	case g == nil:
		return 1
	case g.fixed > 0:
		return g.fixed
	}
	l := g.Latency()
	if l < Slow {
		return 1
	}
	max := g.max
	if max <= 0 {
		max = DefaultMax
	}
	return int(min(int64(max), int64(l/perWorker)))
}

// Limit is the most the gauge will answer.
func (g *Gauge) Limit() int {
	switch {
	case g == nil:
		return 1
	case g.fixed > 0:
		return g.fixed
	case g.max > 0:
		return g.max
	}
	return DefaultMax
}

// ForEach calls fn(w, i) for every i in [0, n), from at most width
// goroutines at once (w in [0, width) names the goroutine, for per-worker
// state). With width <= 1, or n <= 1, it runs in the caller's goroutine, in
// order. It returns when every call has returned.
func ForEach(n, width int, fn func(w, i int)) {
	width = min(width, n)
	if width <= 1 {
		for i := range n {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}
