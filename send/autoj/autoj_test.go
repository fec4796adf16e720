package autoj

import (
	"context"
	"slices"
	"testing"
	"time"
)

// fakeJob models a job whose throughput is a function of its streams, on
// a fake clock.
type fakeJob struct {
	n         int
	now       time.Time
	work      float64
	rate      func(n int) float64
	help      func(n int) bool
	bound     bool          // the verdict says the streams are window-bound while more help
	end       time.Duration // the job ends after this long (ctx cancelled)
	start     time.Time
	cancel    context.CancelFunc
	steps     []int // the stream counts it went through
	decisions []Decision
}

func (f *fakeJob) run(t *testing.T, start, most int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.cancel, f.n, f.start, f.now = cancel, start, time.Unix(1e9, 0), time.Unix(1e9, 0)
	f.steps = []int{start}
	a := &Controller{
		Max:  most,
		Work: func() int64 { return int64(f.work) },
		Verdict: func() Verdict {
			if f.help(f.n) {
				return Verdict{Resource: "latency", MoreStreamsHelp: true, WindowBound: f.bound}
			}
			return Verdict{Resource: "sender_cpu", Why: "the sender uses 95% of 2 CPUs"}
		},
		Resize: func(ctx context.Context, n, to int) int {
			f.n = to
			f.steps = append(f.steps, to)
			return to
		},
		OnDecision: func(d Decision) { f.decisions = append(f.decisions, d); t.Log(d) },
		Now:        func() time.Time { return f.now },
		Sleep: func(ctx context.Context, d time.Duration) bool {
			f.work += f.rate(f.n) * d.Seconds()
			f.now = f.now.Add(d)
			if f.now.Sub(f.start) >= f.end {
				f.cancel()
				return false
			}
			return ctx.Err() == nil
		},
	}
	a.Run(ctx, start)
}

func TestAutoControllerGrowsWhileItGains(t *testing.T) {
	// A long path: each stream carries 20 units, the link 170.
	f := &fakeJob{rate: func(n int) float64 { return min(20*float64(n), 170) }, help: func(n int) bool { return 20*n < 170 }, end: time.Minute}
	f.run(t, 2, 16)
	if want := []int{2, 4, 8, 12}; !slices.Equal(f.steps, want) {
		t.Errorf("steps %v, want %v", f.steps, want)
	}
	if last := f.decisions[len(f.decisions)-1]; last.Action != "stop" {
		t.Errorf("last decision %+v, want a stop", last)
	}
}

func TestAutoControllerStopsWhenSaturated(t *testing.T) {
	// CPU-bound from the start: the verdict says no, whatever the gain.
	f := &fakeJob{rate: func(n int) float64 { return 100 }, help: func(int) bool { return false }, end: time.Minute}
	f.run(t, 4, 16)
	if !slices.Equal(f.steps, []int{4}) {
		t.Errorf("steps %v, want none", f.steps)
	}
	if len(f.decisions) != 1 || f.decisions[0].Action != "stop" || f.decisions[0].Resource != "sender_cpu" {
		t.Errorf("decisions %+v, want one stop on sender_cpu", f.decisions)
	}
}

func TestAutoControllerStopsBelowMargin(t *testing.T) {
	// 2 -> 4 brings 5%: not worth it, stop there (no fall: no going back).
	f := &fakeJob{rate: func(n int) float64 { return 100 + float64(n)*2.5 }, help: func(int) bool { return true }, end: 10 * time.Second}
	f.run(t, 2, 16)
	if !slices.Equal(f.steps, []int{2, 4}) {
		t.Errorf("steps %v, want 2 4", f.steps)
	}
}

func TestAutoControllerBacksOff(t *testing.T) {
	// 8 streams thrash: throughput falls, it goes back to 4.
	f := &fakeJob{rate: func(n int) float64 { return map[int]float64{2: 100, 4: 150, 8: 120}[n] }, help: func(int) bool { return true }, end: 20 * time.Second}
	f.run(t, 2, 16)
	if want := []int{2, 4, 8, 4}; !slices.Equal(f.steps, want) {
		t.Errorf("steps %v, want %v", f.steps, want)
	}
	if d := f.decisions[2]; d.Action != "remove" || d.Gain > -0.19 || d.Gain < -0.21 {
		t.Errorf("third decision %+v, want a removal after -20%%", d)
	}
}

func TestAutoControllerMaxAndReprobe(t *testing.T) {
	// Bounded by --max-streams.
	f := &fakeJob{rate: func(n int) float64 { return 10 * float64(n) }, help: func(int) bool { return true }, end: time.Minute}
	f.run(t, 4, 6)
	if !slices.Equal(f.steps, []int{4, 6}) {
		t.Errorf("steps %v, want 4 6", f.steps)
	}
	// Stopped below the margin while the verdict says more would help:
	// after a while it tries one step more, goes back if it brings
	// nothing, and tries again later (the tree's mix has changed: 12
	// streams now help).
	f = &fakeJob{help: func(int) bool { return true }, end: 2 * time.Minute}
	f.rate = func(n int) float64 {
		if n >= 12 && f.now.Sub(f.start) > 30*time.Second {
			return 200
		}
		return 100
	}
	f.run(t, 4, 16)
	if want := []int{4, 8, 12, 8, 12, 16}; !slices.Equal(f.steps, want) {
		t.Errorf("steps %v, want %v", f.steps, want)
	}
}

func TestAutoControllerEnding(t *testing.T) {
	// A job whose tail comes at once makes no change.
	ctx := context.Background()
	a := &Controller{Max: 16, Work: func() int64 { return 1 }, Verdict: func() Verdict { return Verdict{MoreStreamsHelp: true} },
		Ending: func(float64) bool { return true },
		Resize: func(context.Context, int, int) int { t.Error("resized"); return 0 },
		Sleep:  func(context.Context, time.Duration) bool { return true }}
	a.Run(ctx, 2)
}

// TestAutoControllerWaitsForFirstAck: with Started set, the first window
// opens only once it says the first batch was acknowledged. Before, the
// streams fill the connections' buffers and the work sent runs ahead of
// the link: a window over that would be the base of the first step.
func TestAutoControllerWaitsForFirstAck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var slept time.Duration
	acked := false
	verdicts := 0
	a := &Controller{Max: 16, Work: func() int64 { return 1 << 20 },
		Started: func() bool { return acked },
		Verdict: func() Verdict {
			if !acked {
				t.Fatalf("a window opened %v in, before the first acknowledgement", slept)
			}
			if verdicts++; verdicts > 1 {
				cancel()
			}
			return Verdict{}
		},
		Resize: func(context.Context, int, int) int { return 2 },
		Sleep: func(ctx context.Context, d time.Duration) bool {
			if slept += d; slept >= 3*time.Second {
				acked = true
			}
			return ctx.Err() == nil
		}}
	a.Run(ctx, 2)
	if verdicts == 0 {
		t.Error("no window after the first acknowledgement")
	}
}

// TestAutoControllerWindowBoundDoubles: streams each held by their window
// (a long path over SSH) double in one step where they would grow by
// half from 8 on: the count that fills the path comes a step sooner.
func TestAutoControllerWindowBoundDoubles(t *testing.T) {
	// Each stream carries 20 units, the link 300.
	rate := func(n int) float64 { return min(20*float64(n), 300) }
	for _, bound := range []bool{false, true} {
		f := &fakeJob{rate: rate, help: func(n int) bool { return 20*n < 300 }, end: time.Minute}
		f.bound = bound
		f.run(t, 8, 16)
		want := []int{8, 12, 16}
		if bound {
			want = []int{8, 16}
		}
		if !slices.Equal(f.steps, want) {
			t.Errorf("window-bound %v: steps %v, want %v", bound, f.steps, want)
		}
	}
}
