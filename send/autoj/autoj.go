// Package autoj is -j auto's controller: it steers the number of streams
// of a job from the job's throughput and the bottleneck verdict (package
// metrics), through functions its caller supplies (Controller.Resize,
// which the engine points at send.Pool's Grow and Retire).
//
// Where it sits: it imports nothing of the project; the engine drives
// it. It sits below package send because what it steers is the sending
// pool, and must not import send or the receiving side
// (internal/archtest).
package autoj

import (
	"context"
	"fmt"
	"time"
)

// Controller is -j auto's controller: it starts the job with a few
// streams and adds more while the aggregate throughput rises by a
// meaningful margin and the bottleneck verdict says more streams would
// help; it stops when a CPU, the link or a disk is saturated or the gain
// is below the margin, and goes back a step when the throughput fell.
// Throughput is work per second as the sharder weighs it: bytes plus
// sharder.DefaultFileCost per file.
//
// It measures over windows, short at first (the first step needs only the
// verdict), and lets the streams settle after each change before
// measuring again; in the job's last seconds it changes nothing, so a
// short job runs with the streams it started with. Once it
// has stopped, it tries one step more now and then while the verdict
// says more streams would help (the tree's mix may change).
type Controller struct {
	Max    int     // streams at most
	Margin float64 // the gain a step must bring to go on (default 0.10)
	// Work is the work acknowledged so far: bytes plus sharder.DefaultFileCost
	// per file.
	Work func() int64
	// Started, if set, says the first batch was acknowledged: the clock
	// starts then (else with the first work). Until then the streams
	// fill the connections' buffers, and work sent runs ahead of the
	// link: a first window measured from the first byte sent made a step
	// from 2 to 4 streams, each held to 2 MiB/s, look like a 25% loss.
	Started func() bool
	// Verdict judges the window since its previous call (the first call
	// opens a window; its answer is ignored).
	Verdict func() Verdict
	// Ending, if set, says the job's tail has come at this rate (work per
	// second): no more changes, the pool's tail splitting takes over.
	Ending func(rate float64) bool
	// Resize changes the streams from n to to and returns how many run
	// now (adding streams opens connections: it may take a while).
	Resize func(ctx context.Context, n, to int) int
	// OnDecision reports each decision: a change, or a stop.
	OnDecision func(Decision)
	// Sleep waits d (false: ctx ended); Now is the clock (tests fake them).
	Sleep func(ctx context.Context, d time.Duration) bool
	Now   func() time.Time
}

// Verdict is what Controller needs of the bottleneck verdict.
type Verdict struct {
	Resource        string
	Why             string
	MoreStreamsHelp bool
	// WindowBound says each stream carries about as much as its window
	// lets it a round trip (an SSH channel's 2 MiB): the streams, not the
	// link, hold the rate, and each stream more adds its window's worth
	// until the link is full. A step then doubles the streams, where it
	// would add half as many again.
	WindowBound bool
}

// Decision is one decision of Controller.
type Decision struct {
	Action   string  // "add", "remove" or "stop"
	From, To int     // streams before and after
	Rate     float64 // work per second over the last window
	Gain     float64 // of the last step, as a fraction (0 when there was none)
	Resource string  // the verdict's bottleneck
	Reason   string
}

func (d Decision) String() string {
	return fmt.Sprintf("auto: %d -> %d streams: %s", d.From, d.To, d.Reason)
}

// Windows of Controller.
const (
	autoFirstWindow = 500 * time.Millisecond
	autoWindow      = 2 * time.Second
	autoSettle      = time.Second // after a change, before measuring
	autoReprobe     = 8           // windows stopped before one more step is tried
	autoDrop        = 0.05        // a fall beyond noise: go back
)

// Run steers the pool from n streams until ctx ends or the job's tail.
func (a *Controller) Run(ctx context.Context, n int) {
	if a.Sleep == nil {
		a.Sleep = sleepCtx
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	pol := &streamPolicy{max: a.Max, margin: a.Margin, reprobe: autoReprobe}
	if pol.margin <= 0 {
		pol.margin = 0.10
	}
	// The clock starts with the first acknowledged work (not while the
	// streams connect or the walk begins).
	started := a.Started
	if started == nil {
		started = func() bool { return a.Work() != 0 }
	}
	for !started() {
		if !a.Sleep(ctx, 50*time.Millisecond) {
			return
		}
	}
	window := autoFirstWindow
	for {
		a.Verdict()
		w0, t0 := a.Work(), a.Now()
		if !a.Sleep(ctx, window) {
			return
		}
		rate := float64(a.Work()-w0) / a.Now().Sub(t0).Seconds()
		v := a.Verdict()
		window = autoWindow
		if a.Ending != nil && a.Ending(rate) {
			return
		}
		d, ok := pol.next(n, rate, v)
		if !ok {
			continue
		}
		if d.To != n {
			d.To = a.Resize(ctx, n, d.To)
			if ctx.Err() != nil {
				return
			}
			if d.To == n { // none could be added (or retired)
				d.Action, d.Reason = "stop", d.Reason+"; the streams could not change"
				pol.stop()
			}
		}
		if a.OnDecision != nil {
			a.OnDecision(d)
		}
		if d.To != n {
			n = d.To
			if !a.Sleep(ctx, autoSettle) {
				return
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// streamPolicy decides, window after window, from the throughput at the
// current number of streams and the verdict.
type streamPolicy struct {
	max     int
	margin  float64
	reprobe int // windows stopped before trying a step again

	baseN   int     // streams before the last step (0: no step under way)
	base    float64 // their throughput
	stopped bool
	held    int  // windows since it stopped
	retry   bool // the step under way is a try after a stop
}

// next returns the decision after a window at n streams; ok false: none
// (stay, and nothing new to report).
func (p *streamPolicy) next(n int, rate float64, v Verdict) (d Decision, ok bool) {
	d = Decision{From: n, To: n, Rate: rate, Resource: v.Resource}
	help := v.MoreStreamsHelp && n < p.max
	why := v.Why
	if why == "" {
		why = v.Resource
	}
	if p.baseN == 0 {
		if p.stopped {
			p.held++
			if !help || p.held < p.reprobe {
				return d, false
			}
			// The verdict still says more streams would help: one step
			// more, smaller, and wait longer before the next try.
			p.stopped, p.reprobe, p.retry = false, 2*p.reprobe, true
			p.baseN, p.base = n, rate
			d.Action, d.To = "add", min(n+max(1, n/2), p.max)
			d.Reason = fmt.Sprintf("trying again: %s", why)
			return d, true
		}
		if !help {
			p.stop()
			d.Action = "stop"
			if n >= p.max {
				d.Reason = fmt.Sprintf("at --max-streams (%s)", why)
			} else {
				d.Reason = fmt.Sprintf("more streams would not help: %s", why)
			}
			return d, true
		}
		p.baseN, p.base = n, rate
		d.Action, d.To = "add", growStep(n, p.max, v.WindowBound)
		d.Reason = fmt.Sprintf("more streams would help: %s", why)
		return d, true
	}
	// A step from baseN to n: what did it bring?
	gain := 1.0
	if p.base > 0 {
		gain = rate/p.base - 1
	}
	d.Gain = gain
	retry := p.retry
	p.retry = false
	switch {
	case gain < -autoDrop || retry && gain < p.margin:
		d.Action, d.To = "remove", p.baseN
		d.Reason = fmt.Sprintf("throughput %+.0f%%: back to %d", gain*100, p.baseN)
		if gain >= -autoDrop {
			d.Reason = fmt.Sprintf("throughput %+.0f%%, less than %.0f%%: back to %d", gain*100, p.margin*100, p.baseN)
		}
		p.stop()
	case gain >= p.margin && help:
		p.baseN, p.base = n, rate
		d.Action, d.To = "add", growStep(n, p.max, v.WindowBound)
		d.Reason = fmt.Sprintf("throughput %+.0f%%", gain*100)
	case gain >= p.margin:
		p.stop()
		d.Action = "stop"
		if n >= p.max {
			d.Reason = fmt.Sprintf("throughput %+.0f%%; at --max-streams", gain*100)
		} else {
			d.Reason = fmt.Sprintf("throughput %+.0f%%; more streams would not help: %s", gain*100, why)
		}
	default:
		p.stop()
		d.Action = "stop"
		d.Reason = fmt.Sprintf("throughput %+.0f%%, less than %.0f%%", gain*100, p.margin*100)
	}
	return d, true
}

func (p *streamPolicy) stop() {
	p.stopped, p.baseN, p.base, p.held = true, 0, 0, 0
}

// growStep is the next step up from n: doubling while few or while the
// streams are window-bound, then by half.
func growStep(n, most int, windowBound bool) int {
	if n < 8 || windowBound {
		return min(2*n, most)
	}
	return min(n+n/2, most)
}
