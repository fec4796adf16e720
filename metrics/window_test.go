package metrics

import (
	"math"
	"testing"
	"time"
)

// TestWindowSmooths: data arriving in bursts every second (a bandwidth
// limit's) reads as its mean rate over the window, not as bursts and
// zeros; a change of pace shows within the span.
func TestWindowSmooths(t *testing.T) {
	w := NewWindow(5 * time.Second)
	t0 := time.Unix(1000, 0)
	var v float64
	var rate float64
	for tick := range 100 { // 10 s of 100 ms ticks
		if tick%10 == 9 {
			v += 20 << 20 // 20 MiB each second, all at once
		}
		rate = w.Add(t0.Add(time.Duration(tick+1)*100*time.Millisecond), v)
		if tick >= 60 && math.Abs(rate-20<<20) > 4<<20 {
			t.Fatalf("tick %d: %.1f MiB/s, want about 20", tick, rate/(1<<20))
		}
	}
	// It stops: within the span the rate falls to 0.
	for tick := 100; tick < 160; tick++ {
		rate = w.Add(t0.Add(time.Duration(tick+1)*100*time.Millisecond), v)
	}
	if rate != 0 {
		t.Errorf("5 s after the last byte: %v B/s", rate)
	}
	if n := len(w.samples); n > 52 {
		t.Errorf("%d samples kept for a 5 s window of 100 ms ticks", n)
	}
}

// TestWindowStart: before two samples apart in time there is no rate; a
// window sampled less often than its span spans the two last samples.
func TestWindowStart(t *testing.T) {
	w := NewWindow(5 * time.Second)
	t0 := time.Unix(1000, 0)
	if r := w.Add(t0, 100); r != 0 {
		t.Errorf("one sample: %v", r)
	}
	if r := w.Add(t0, 200); r != 0 {
		t.Errorf("no time between samples: %v", r)
	}
	if r := w.Add(t0.Add(10*time.Second), 1200); r != 100 {
		t.Errorf("10 s later, 1000 more: %v/s, want 100", r)
	}
	if r := w.Add(t0.Add(20*time.Second), 1200); r != 0 {
		t.Errorf("nothing in the last 10 s: %v/s", r)
	}
}
