// Package autojobs is -j auto (the default) on one job: the job starts
// with a few streams, and send/autoj's Controller adds more while
// throughput rises, up to --max-streams. This package is the glue
// between that controller and a running job: how many streams to start
// with (Start, Near), how many to open ahead over a far path (FarAhead,
// FarStep), the job's metrics with room for added streams (NewMetrics,
// Connected), and Steer, which samples the job's metrics and the host's
// CPUs for the controller and grows or shrinks the pool as it decides.
//
// Streams can be added to in-process receivers and to SSH streams (each
// one more SSH connection joining the agent hub); other transports (a
// data plane, bulkmove serve, a pull, --via-agent) run with the start
// count: the engine says which (Steer.Growable).
//
// It sits below internal/engine, which passes it the values it needs
// (the pool, the transport, the metrics, where to report decisions); it
// must not import internal/engine. The controller's own logic, which
// knows nothing of pools or transports, is send/autoj's.
package autojobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
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
	"github.com/bulkmove/bulkmove/transport"
)

// Flags are -j auto's flags.
type Flags struct {
	On  bool // -j auto
	Max int  // --max-streams
}

// -j auto starts with 4 streams: remote streams connect in parallel, and
// four hide a round trip's wait; locally, on two cores, 100,000 small
// files went 12% faster over 4 streams than over 2 (and 8 were slower
// again), and a job of a few seconds is over before a step is measured.
const (
	Start      = 4
	MaxStreams = 16
)

// SSHStart is how many connections -j auto dials at first to a host over
// SSH: Start, but no more than this host's CPUs (at least 2). Each one
// costs a key exchange, an authentication and a login shell at the far
// end whether the job keeps it or not, and over a near path Near keeps
// only as many as the CPUs; over a far path the first step brings the job
// to twice Start at once (FarStep), as when it started with Start.
func SSHStart() int { return min(Start, max(2, runtime.NumCPU())) }

// Near returns the streams -j auto starts with once the first
// connection to the host is up (the others were dialed with it), from
// jobs, the start count: over a near path (the kernel's round trip under
// FarRTT), as many as this host has CPUs, at least 2, at most the start
// count. There the streams are held by CPUs, not by a window, and beyond
// the CPUs they only share them: on a near path more streams than CPUs
// ran slower than as many as the CPUs (see docs/streams.md). The
// controller still adds streams while a step brings its margin. Over a
// far path, or where the round trip cannot be read (a jump host, a
// ProxyCommand), the start count stays. When it returns fewer, the
// decision says why.
func Near(jobs int, rtt time.Duration, ok bool) (int, *autoj.Decision) {
	if !IsNear(rtt, ok) {
		return jobs, nil
	}
	n := min(jobs, max(2, runtime.NumCPU()))
	if n >= jobs {
		return jobs, nil
	}
	return n, &autoj.Decision{Action: "remove", From: jobs, To: n,
		Reason: fmt.Sprintf("a near path (round trip %s) and %d CPUs here: streams beyond the CPUs would only share them", rtt.Round(10*time.Microsecond), runtime.NumCPU())}
}

// IsNear says whether a path of the kernel's round trip rtt (ok false: it
// cannot be read) is near: read, and under FarRTT.
func IsNear(rtt time.Duration, ok bool) bool { return ok && rtt < FarRTT }

// FarAhead is how many connections to open ahead, over a far path (the
// kernel's round trip from the first connection), for -j auto's first
// step, which Steer takes as soon as the streams run: over such a path a
// connection takes several round trips to open, and streams opened only
// once the first window is measured join far into a short job.
func FarAhead(jobs, maxStreams int, rtt time.Duration, ok bool) int {
	if !ok || rtt < FarRTT {
		return 0
	}
	return FarStep(jobs, maxStreams)
}

// FarStep is how many streams the far path's first step adds: as many as
// the job starts with, and at least up to twice Start, within
// --max-streams.
func FarStep(jobs, maxStreams int) int { return min(max(jobs, 2*Start-jobs), maxStreams-jobs) }

// NewMetrics makes the job's metrics for its jobs streams, with spare
// counters for the streams -j auto may add up to maxStreams if growable.
func NewMetrics(jobs, maxStreams int, growable bool) *metrics.Job {
	k := jobs
	if growable {
		k = maxStreams
	}
	m := metrics.NewJob(k)
	m.AutoJ.InUse.Store(int64(jobs))
	m.AutoJ.Target.Store(int64(jobs))
	return m
}

// Connected fits the metrics' streams to the n that connected.
func Connected(m *metrics.Job, n int, growable bool) {
	m.AutoJ.InUse.Store(int64(n))
	m.AutoJ.Target.Store(int64(n))
	if !growable {
		m.Streams = m.Streams[:n]
	}
}

// Steer is -j auto's controller on one job's pool while it sends the
// file data.
type Steer struct {
	Jobs     int  // the streams the job runs with
	Max      int  // --max-streams
	Growable bool // whether this job's transport may take more streams
	// Local: the receiver is in this process (or on this host), where
	// only the CPUs are shared.
	Local     bool
	Metrics   *metrics.Job
	Pool      *send.Pool
	Transport transport.Transport
	Tail      int64                // seconds of work left that make the tail; 0 for Tail
	Stderr    io.Writer            // warnings
	Decided   func(autoj.Decision) // each decision, to log and report
}

// Run runs the controller until stop, which ends it and waits for it.
func (s Steer) Run(ctx context.Context) (stop func()) {
	if !s.Growable || !s.Transport.Caps().Add {
		return func() {}
	}
	pool, m, tr, local := s.Pool, s.Metrics, s.Transport, s.Local
	pool.AddConn, pool.MaxConns = tr.Add, s.Max
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
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
	tail := float64(Tail)
	if s.Tail > 0 {
		tail = float64(s.Tail)
	}
	host, _ := hostcpu.Read()
	a := &autoj.Controller{
		Max:     s.Max,
		Work:    func() int64 { return int64(sent()) },
		Started: func() bool { return m.DoneFiles.Load()+m.Skipped.Load()+m.Failed.Load() > 0 },
		Verdict: func() autoj.Verdict {
			v := m.VerdictSince(mark, local)
			mark = m.Mark()
			w, now := m.WireBytes(), time.Now()
			perStream := float64(w-wire) / now.Sub(wireAt).Seconds() / float64(max(m.Active(), 1))
			wire, wireAt = w, now
			a := Verdict(v, local || WindowBound(perStream, time.Duration(rtt.Load())))
			a.WindowBound = a.MoreStreamsHelp && AtWindow(perStream, time.Duration(rtt.Load()))
			// A busy host over a near path (or to a local destination):
			// more streams would only share the CPUs. Where both hosts
			// share the same cores, a plain stream's writes wait on an
			// sshd starved of CPU, which looks like the network, and a
			// step to more streams makes the copy slower. Over a far path
			// (FarRTT) streams are held by their window, not by CPU,
			// and a step's gain decides as before.
			h, ok := hostcpu.Read()
			if ok && a.MoreStreamsHelp && h.BusySince(host, hostcpu.Busy) && time.Duration(rtt.Load()) < FarRTT {
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
					termsafe.Errorf(s.Stderr, "warning: -j auto: %v", err)
				}
				m.AutoJ.InUse.Store(int64(len(pool.Stats())))
				return n + added
			}
			for ; n > to && pool.Retire() >= 0; n-- {
			}
			return n
		},
		OnDecision: s.Decided,
	}
	var wg sync.WaitGroup
	spares := func() {}
	wg.Go(func() {
		n := s.Jobs
		if d := tr.RTT(); d > 0 { // a remote host's round trip
			rtt.Store(int64(d))
			// Over a long path each SSH stream carries at most 2 MiB a
			// round trip: the first step is taken at once, over
			// connections opened ahead (from the first connection's
			// round trip, while the agent started: FarAhead).
			if more := FarStep(s.Jobs, s.Max); d >= FarRTT && more > 0 {
				spares = tr.Prepare(parent, more)
				select {
				case <-pool.Running(): // (before it, Grow adds none)
				case <-ctx.Done():
				}
				if to := a.Resize(ctx, n, n+more); to > n {
					s.Decided(autoj.Decision{Action: "add", From: n, To: to,
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

// Verdict is what the controller makes of the bottleneck verdict. A
// saturated CPU stops it. Streams blocked on the link, the receiver's
// disk or the source look alike whether the shared resource is full or
// each stream is limited on its own (a stream writes one file at a time;
// an SSH channel carries 2 MiB a round trip): then the verdict says no
// more streams, but as long as no CPU is saturated one step is worth
// trying, and its gain decides. For the link, only while the streams come
// near their window's limit (windowed): else the link itself is full, or
// the receiver's side (whose sshd is in no verdict) is the limit.
func Verdict(v *metrics.Verdict, windowed bool) autoj.Verdict {
	a := autoj.Verdict{Resource: v.Resource, Why: v.Why, MoreStreamsHelp: v.MoreStreamsHelp}
	switch v.Resource {
	case metrics.Network, metrics.ReceiverWrite, metrics.SourceRead:
		if a.MoreStreamsHelp || max(v.Shares[metrics.SenderCPU], v.Shares[metrics.ReceiverCPU]) >= CPUBusy {
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

// WindowBound says whether streams sending perStream bytes a second over
// a round trip of rtt may be held by an SSH channel's limit, 2 MiB a round
// trip: over a far path (its first seconds are TCP's slow start, far
// below the limit), or when they come near it (a quarter of it:
// acknowledgements and manifests take round trips too). Over a near path
// a stream moves a tiny share of that limit, over a far one a large
// share.
func WindowBound(perStream float64, rtt time.Duration) bool {
	if rtt <= 0 {
		return false
	}
	return rtt >= FarRTT || perStream >= 0.25*sshWindow/rtt.Seconds()
}

// AtWindow says whether streams sending perStream bytes a second over a
// round trip of rtt carry about what an SSH channel's window lets them
// (half of 2 MiB a round trip, or more: the acknowledgements and
// manifests take round trips too): the streams hold the rate back, not
// the link, and a step doubles them (autoj.Verdict.WindowBound). Over
// a far path of 100 ms that is 10 MiB/s a stream.
func AtWindow(perStream float64, rtt time.Duration) bool {
	return rtt >= FarRTT && perStream >= 0.5*sshWindow/rtt.Seconds()
}

// FarRTT is the round trip of a far path: -j auto opens the
// connections of a first step ahead, and takes a link verdict for one
// that more streams may help.
const FarRTT = compress.FarRTT

// sshWindow is an SSH channel's window (x/crypto/ssh, OpenSSH).
const sshWindow = 2 << 20

// CPUBusy is the CPU share (of all cores) beyond which -j auto adds
// no streams on a link or disk verdict.
const CPUBusy = 0.75

// Tail is how many seconds of work left make the job's tail, when -j
// auto changes nothing more: a step is measured after a settle and a
// window (3 s), and must then still have work to speed up: a step taken
// in a short job's last seconds costs it, and the job is over before the
// step could be undone.
//
// BULKMOVE_TUNE_AUTO_TAIL=N sets it to N seconds (Steer.Tail; tests use 1, to
// see steps in jobs of a few seconds).
const Tail = 5
