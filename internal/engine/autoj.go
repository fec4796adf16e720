package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/hostcpu"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/autoj"
	"github.com/bulkmove/bulkmove/send/compress"
	"github.com/bulkmove/bulkmove/sharder"
)

// -j auto (the default): the job starts with a few streams and a
// controller (autoj.Controller) adds more while throughput rises, up to
// --max-streams. Streams can be added to in-process receivers and to SSH
// streams (each one more SSH connection joining the agent hub); other
// transports (a data plane, bulkmove serve, a pull, --via-agent) run with
// the start count.

// AutoJobs are -j auto's flags.
type AutoJobs struct {
	On  bool // -j auto
	Max int  // --max-streams
}

// -j auto starts with 4 streams: remote streams connect in parallel, and
// four hide a round trip's wait; locally, on two cores, 100,000 small
// files went 12% faster over 4 streams than over 2 (and 8 were slower
// again), and a job of a few seconds is over before a step is measured.
const (
	autoStart      = 4
	autoMaxStreams = 16
)

// jobsValue is -j: a number of streams, or auto.
// JobsValue is -j: a number of streams, or auto.
type JobsValue struct{ C *Config }

func (v JobsValue) String() string {
	if v.C == nil || v.C.Auto.On {
		return "auto"
	}
	return strconv.Itoa(v.C.Jobs)
}

func (v JobsValue) Set(s string) error {
	if s == "auto" {
		v.C.Auto.On = true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a number of streams or auto")
	}
	v.C.Jobs, v.C.Auto.On = n, false
	return nil
}

// autoStart sets, with -j auto, the streams the job starts with, once the
// transport is known.
func (j *job) autoStart() {
	f := &j.flags
	if !f.Auto.On {
		return
	}
	f.Jobs = min(autoStart, f.Auto.Max)
}

// nearStart returns the streams -j auto starts with once the first
// connection to the host is up (the others were dialed with it): over a
// near path (the kernel's round trip under autoFarRTT), as many as this
// host has CPUs, at least 2, at most the start count. There the streams
// are held by CPUs, not by a window, and beyond the CPUs they only share
// them: on a near path more streams than CPUs ran slower than as many as
// the CPUs (see docs/streams.md). The controller still adds streams
// while a step brings its margin. Over a far path, or where the round
// trip cannot be read (a jump host, a ProxyCommand), the start count
// stays. The count it returns is the job's from then on.
func (j *job) nearStart(rtt time.Duration, ok bool) int {
	f := &j.flags
	if !f.Auto.On || !ok || rtt >= autoFarRTT {
		return f.Jobs
	}
	n := min(f.Jobs, max(2, runtime.NumCPU()))
	if n < f.Jobs {
		j.autoDecided(autoj.Decision{Action: "remove", From: f.Jobs, To: n,
			Reason: fmt.Sprintf("a near path (round trip %s) and %d CPUs here: streams beyond the CPUs would only share them", rtt.Round(10*time.Microsecond), runtime.NumCPU())})
		f.Jobs = n
	}
	return n
}

// autoDecided reports a decision of -j auto: the log, the JSON events and
// the metrics.
func (j *job) autoDecided(d autoj.Decision) {
	if m := j.m; m != nil {
		m.AutoJ.Decided(d.Action)
		m.AutoJ.Target.Store(int64(d.To))
	}
	j.trace("%s", d)
	ev := &StreamsEvent{Action: d.Action, From: d.From, To: d.To, Rate: d.Rate, Gain: d.Gain, Resource: d.Resource, Reason: d.Reason}
	j.ev.emit("streams", &ev.Head, ev)
}

// growable says whether -j auto may add streams to this job.
func (j *job) growable() bool {
	f := j.flags
	switch {
	case !f.Auto.On || f.Auto.Max <= f.Jobs || j.hub != nil || j.serveAddr != "":
		return false
	case j.remote != nil:
		return f.Transport == "" || f.Transport == "ssh" // a data plane takes K streams, no more
	default:
		return !f.ViaAgent
	}
}

// newMetrics makes the job's metrics, with spare counters for the
// streams -j auto may add.
func (j *job) newMetrics() *metrics.Job {
	k := j.flags.Jobs
	if j.growable() {
		k = j.flags.Auto.Max
	}
	m := metrics.NewJob(k)
	m.AutoJ.InUse.Store(int64(j.flags.Jobs))
	m.AutoJ.Target.Store(int64(j.flags.Jobs))
	return m
}

// connected fits the metrics' streams to the n that connected.
func (j *job) connected(n int) {
	j.m.AutoJ.InUse.Store(int64(n))
	j.m.AutoJ.Target.Store(int64(n))
	if !j.growable() {
		j.m.Streams = j.m.Streams[:n]
	}
}

// steer runs -j auto's controller on the pool while it sends the file
// data; stop ends it and waits for it.
func (j *job) steer(ctx context.Context, pool *send.Pool, local bool) (stop func()) {
	if !j.growable() || !j.tr.Caps().Add {
		return func() {}
	}
	pool.AddConn, pool.MaxConns = j.tr.Add, j.flags.Auto.Max
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	m := j.m
	mark := m.Mark()
	var rtt atomic.Int64 // remote: the SSH round trip, measured as the controller starts
	wire, wireAt := int64(0), time.Now()
	work := func(bytes, files int64) float64 { return float64(bytes + files*sharder.DefaultFileCost) }
	// What the streams sent (and the receivers found in place): smoother
	// than the acknowledgements, which come a batch at a time.
	sent := func() float64 {
		var b, f int64
		for _, c := range m.Streams {
			b += c.BytesSent.Load()
			f += c.FilesSent.Load()
		}
		return work(b, f+m.Skipped.Load())
	}
	tail := float64(autoTail)
	if n, err := EnvCount("BULKMOVE_AUTO_TAIL", "seconds"); err != nil {
		termsafe.Errorf(j.stderr, "warning: %v", err)
	} else if n > 0 {
		tail = float64(n)
	}
	host, _ := hostcpu.Read()
	a := &autoj.Controller{
		Max:     j.flags.Auto.Max,
		Work:    func() int64 { return int64(sent()) },
		Started: func() bool { return m.DoneFiles.Load()+m.Skipped.Load()+m.Failed.Load() > 0 },
		Verdict: func() autoj.Verdict {
			v := m.VerdictSince(mark, local)
			mark = m.Mark()
			w, now := m.WireBytes(), time.Now()
			perStream := float64(w-wire) / now.Sub(wireAt).Seconds() / float64(max(m.Active(), 1))
			wire, wireAt = w, now
			a := autoVerdict(v, local || windowBound(perStream, time.Duration(rtt.Load())))
			// A busy host over a near path (or to a local destination):
			// more streams would only share the CPUs. Where both hosts
			// share the same cores, a plain stream's writes wait on an
			// sshd starved of CPU, which looks like the network, and a
			// step to more streams makes the copy slower. Over a far path
			// (autoFarRTT) streams are held by their window, not by CPU,
			// and a step's gain decides as before.
			h, ok := hostcpu.Read()
			if ok && a.MoreStreamsHelp && h.BusySince(host, hostcpu.Busy) && time.Duration(rtt.Load()) < autoFarRTT {
				a.MoreStreamsHelp = false
				a.Why += "; but this host's CPUs are busy: more streams would only share them"
			}
			host = h
			return a
		},
		// The tail is judged by what was sent, which runs ahead while the
		// connections' buffers fill: over SSH a job of a few hundred MiB
		// can look like its tail in the first window, and runs with its
		// start count. Judged by acknowledged work (which lags instead),
		// short jobs took steps that cost them more than they could gain
		// in the time left.
		Ending: func(rate float64) bool {
			if !m.WalkDone.Load() || rate <= 0 {
				return false
			}
			left := work(m.PlannedBytes.Load(), m.PlannedFiles.Load()) - sent()
			return left < rate*tail
		},
		Resize: func(ctx context.Context, n, to int) int {
			if to > n {
				added, err := pool.Grow(ctx, to-n)
				if err != nil && !errors.Is(err, send.ErrGrowClosed) {
					termsafe.Errorf(j.stderr, "warning: -j auto: %v", err)
				}
				m.AutoJ.InUse.Store(int64(len(pool.Stats())))
				return n + added
			}
			for ; n > to && pool.Retire() >= 0; n-- {
			}
			return n
		},
		OnDecision: j.autoDecided,
	}
	var wg sync.WaitGroup
	spares := func() {}
	wg.Go(func() {
		n := j.flags.Jobs
		if d := j.tr.RTT(); d > 0 { // a remote host's round trip
			rtt.Store(int64(d))
			// Over a long path each SSH stream carries at most 2 MiB a
			// round trip: the first step is taken at once, over
			// connections opened ahead (from the first connection's
			// round trip, while the agent started: farAhead).
			if more := j.farStep(); d >= autoFarRTT && more > 0 {
				spares = j.tr.Prepare(parent, more)
				select {
				case <-pool.Running(): // (before it, Grow adds none)
				case <-ctx.Done():
				}
				if to := a.Resize(ctx, n, n+more); to > n {
					j.autoDecided(autoj.Decision{Action: "add", From: n, To: to,
						Reason: fmt.Sprintf("a far path (round trip %s): each SSH stream carries at most 2 MiB a round trip", d.Round(time.Millisecond))})
					n = to
				}
			}
		}
		a.Run(ctx, n)
	})
	return func() {
		cancel()
		wg.Wait()
		spares()
	}
}

// farAhead is how many connections to open ahead, over a far path (the
// kernel's round trip from the first connection), for -j auto's first
// step, which steer takes as soon as the streams run: over such a path a
// connection takes several round trips to open, and streams opened only
// once the first window is measured join far into a short job.
func (j *job) farAhead(rtt time.Duration, ok bool) int {
	if !j.growable() || !ok || rtt < autoFarRTT {
		return 0
	}
	return j.farStep()
}

// farStep is how many streams the far path's first step adds: as many as
// the job starts with, within --max-streams.
func (j *job) farStep() int { return min(j.flags.Jobs, j.flags.Auto.Max-j.flags.Jobs) }

// autoVerdict is what the controller makes of the bottleneck verdict. A
// saturated CPU stops it. Streams blocked on the link, the receiver's
// disk or the source look alike whether the shared resource is full or
// each stream is limited on its own (a stream writes one file at a time;
// an SSH channel carries 2 MiB a round trip): then the verdict says no
// more streams, but as long as no CPU is saturated one step is worth
// trying, and its gain decides. For the link, only while the streams come
// near their window's limit (windowed): else the link itself is full, or
// the receiver's side (whose sshd is in no verdict) is the limit.
func autoVerdict(v *metrics.Verdict, windowed bool) autoj.Verdict {
	a := autoj.Verdict{Resource: v.Resource, Why: v.Why, MoreStreamsHelp: v.MoreStreamsHelp}
	switch v.Resource {
	case metrics.Network, metrics.ReceiverWrite, metrics.SourceRead:
		if a.MoreStreamsHelp || max(v.Shares[metrics.SenderCPU], v.Shares[metrics.ReceiverCPU]) >= autoCPUBusy {
			break
		}
		if v.Resource != metrics.Network {
			a.MoreStreamsHelp = true
			a.Why += " (no CPU saturated: more streams may help)"
		} else if windowed {
			a.MoreStreamsHelp = true
			a.Why += " (no CPU saturated, and each stream carries at most 2 MiB a round trip: more streams may help)"
		}
	}
	return a
}

// windowBound says whether streams sending perStream bytes a second over
// a round trip of rtt may be held by an SSH channel's limit, 2 MiB a round
// trip: over a far path (its first seconds are TCP's slow start, far
// below the limit), or when they come near it (a quarter of it:
// acknowledgements and manifests take round trips too). Over a near path
// a stream moves a tiny share of that limit, over a far one a large
// share.
func windowBound(perStream float64, rtt time.Duration) bool {
	if rtt <= 0 {
		return false
	}
	return rtt >= autoFarRTT || perStream >= 0.25*sshWindow/rtt.Seconds()
}

// autoFarRTT is the round trip of a far path: -j auto opens the
// connections of a first step ahead, and takes a link verdict for one
// that more streams may help.
const autoFarRTT = compress.FarRTT

// sshWindow is an SSH channel's window (x/crypto/ssh, OpenSSH).
const sshWindow = 2 << 20

// autoCPUBusy is the CPU share (of all cores) beyond which -j auto adds
// no streams on a link or disk verdict.
const autoCPUBusy = 0.75

// autoTail is how many seconds of work left make the job's tail, when -j
// auto changes nothing more: a step is measured after a settle and a
// window (3 s), and must then still have work to speed up: a step taken
// in a short job's last seconds costs it, and the job is over before the
// step could be undone.
//
// BULKMOVE_AUTO_TAIL=N sets it to N seconds (tests use 1, to see steps in
// jobs of a few seconds).
const autoTail = 5

// StreamsEvent is a decision of -j auto.
type StreamsEvent struct {
	Head
	Action   string  `json:"action"` // add, remove, stop
	From     int     `json:"from"`
	To       int     `json:"to"`
	Rate     float64 `json:"rate"` // bytes plus 16 KiB a file, per second, over the last window
	Gain     float64 `json:"gain"` // of the last step, a fraction
	Resource string  `json:"resource"`
	Reason   string  `json:"reason"`
}
