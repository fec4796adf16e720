package ioconc

import (
	"testing"
	"time"
)

// timed counts the operations of n that s says to time, and the
// operations those timings stand for.
func timed(s *Sampler, g *Gauge, n int) (times, covers int) {
	for range n {
		if k := s.Next(g); k > 0 {
			times++
			covers += k
		}
	}
	return times, covers
}

// TestSampler: a fast filesystem's operations are timed one in
// sampleEvery, a slow one's or an unmeasured one's every time, and the
// timings stand for every operation.
func TestSampler(t *testing.T) {
	var s Sampler
	g := Auto(0)
	if n, _ := timed(&s, g, 100); n != 100 {
		t.Errorf("no measure yet: %d of 100 timed, want all", n)
	}
	if n, _ := timed(&s, nil, 100); n != 100 {
		t.Errorf("no gauge: %d of 100 timed, want all", n)
	}
	for range window {
		g.Observe(5 * time.Microsecond)
	}
	s = Sampler{}
	n, covers := timed(&s, g, 16*sampleEvery)
	if n != 16 || covers != 16*sampleEvery {
		t.Errorf("fast: %d of %d timed standing for %d, want 16 standing for all", n, 16*sampleEvery, covers)
	}
	for range 4 * window {
		g.Observe(2 * time.Millisecond)
	}
	if !g.Slow() {
		t.Fatalf("latency %v after slow operations", g.Latency())
	}
	if n, _ := timed(&s, g, 100); n != 100 {
		t.Errorf("slow: %d of 100 timed, want all", n)
	}
}

// TestSamplerSeesSlowdown: a fast filesystem that turns slow is seen
// within window*sampleEvery operations of one goroutine timing by sample.
func TestSamplerSeesSlowdown(t *testing.T) {
	g := Auto(0)
	for range window {
		g.Observe(5 * time.Microsecond)
	}
	var s Sampler
	ops := 0
	for ; ops < 10*window*sampleEvery && !g.Slow(); ops++ {
		if s.Next(g) > 0 {
			g.Observe(5 * time.Millisecond)
		}
	}
	if !g.Slow() || ops > 2*window*sampleEvery {
		t.Errorf("slow after %d operations (slow: %v), want within %d", ops, g.Slow(), 2*window*sampleEvery)
	}
}
