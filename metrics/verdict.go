package metrics

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/ioconc"
)

// Resources a verdict can name.
const (
	SourceRead    = "source_read"    // reading source files (or listing them)
	Network       = "network"        // sending: the link, or the receiver not reading fast enough
	ReceiverWrite = "receiver_write" // the receiver writing files
	SenderCPU     = "sender_cpu"
	ReceiverCPU   = "receiver_cpu"
	Latency       = "latency" // streams wait for the receiver's answers: round trips
	// Reading or writing files is the limit, and each file operation waits
	// for a device or a server (NFS, Lustre): more operations at once
	// (--io-concurrency) help, not more streams.
	SourceLatency = "source_fs_latency"
	DestLatency   = "destination_fs_latency"
	// The bandwidth limit (--bwlimit, its timetable, PUT /bwlimit): the
	// job moves at it, so neither more streams nor anything else helps.
	BwLimit = "bwlimit"
	Idle    = "none" // nothing measured yet, or nothing running
)

// Resources lists every resource, for the gauge with a resource label.
var Resources = []string{SourceRead, Network, ReceiverWrite, SenderCPU, ReceiverCPU, Latency, SourceLatency, DestLatency, BwLimit, Idle}

// Verdict says what limits the job over the last window.
type Verdict struct {
	Resource        string             `json:"resource"`
	MoreStreamsHelp bool               `json:"more_streams_help"`
	Shares          map[string]float64 `json:"shares"` // fraction of stream time (CPU: of all cores) per resource
	Why             string             `json:"why"`
}

// sample is a snapshot of the counters.
type sample struct {
	at        time.Time
	cpu       int64 // this process's CPU nanoseconds
	recvCPU   int64 // sum of the receivers' CPU nanoseconds
	read      int64
	send      int64
	wait      int64
	idle      int64
	recvWrite int64
	active    int
	// the filesystems' latency per operation, now
	srcLat, dstLat time.Duration
	// what the limit paces: bytes written to the connections, or, in a
	// local copy (none written), the file data copied
	wire, copied int64
	limit        int64 // the bandwidth limit now, bytes a second; 0: none
}

func (j *Job) snapshot() sample {
	s := sample{at: time.Now(), cpu: processCPU(), active: j.Active(), limit: j.Limit.Rate()}
	if j.SourceLatency != nil {
		s.srcLat = j.SourceLatency()
	}
	procs := map[string]bool{}
	for _, c := range j.Streams {
		s.read += c.ReadNanos.Load()
		s.send += c.SendNanos.Load()
		s.wait += c.WaitNanos.Load()
		s.idle += c.IdleNanos.Load()
		s.wire += c.WireBytes.Load()
		s.copied += c.BytesSent.Load()
		s.recvWrite += c.RecvWriteNanos.Load() + c.RecvFsyncNanos.Load()
		s.dstLat = max(s.dstLat, time.Duration(c.RecvLatency.Load()))
		if p := c.RecvProcess.Load(); p == nil || !procs[*p] {
			if p != nil {
				procs[*p] = true
			}
			s.recvCPU += c.RecvCPUNanos.Load() // once per receiving process
		}
	}
	return s
}

func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// Thresholds of the verdict.
const (
	cpuSaturated = 0.85 // of all cores
	busy         = 0.5  // of a stream's time
	// The job moves at this fraction of its bandwidth limit or more: the
	// limit is the cap (its bucket lets bursts through, a window's rate
	// sits a little under it).
	atLimit = 0.8
)

// decide computes a verdict from two samples. cores is the number of CPUs
// on each side (the receiver is assumed alike); local says the receiver
// runs in this process, so its CPU is already in cpu.
func decide(a, b sample, cores int, local bool) *Verdict {
	dt := float64(b.at.Sub(a.at))
	// Streams that worked during the window: one that finished in it still
	// spent its time there.
	streams := float64(max(a.active, b.active, 1))
	if dt <= 0 {
		return &Verdict{Resource: Idle, Why: "no interval"}
	}
	frac := func(x, y int64) float64 { return float64(y-x) / dt / streams }
	sh := map[string]float64{
		SourceRead:    frac(a.read, b.read) + frac(a.idle, b.idle),
		Network:       frac(a.send, b.send),
		ReceiverWrite: frac(a.recvWrite, b.recvWrite),
		Latency:       frac(a.wait, b.wait),
		SenderCPU:     float64(b.cpu-a.cpu) / dt / float64(cores),
	}
	if !local {
		sh[ReceiverCPU] = float64(b.recvCPU-a.recvCPU) / dt / float64(cores)
	} else {
		// A local stream's window is full while the destination writes
		// its batches: no round trip, the writing is the wait.
		sh[ReceiverWrite] = max(sh[ReceiverWrite], sh[Latency])
		delete(sh, Latency)
	}
	moved := b.wire - a.wire
	if moved == 0 {
		moved = b.copied - a.copied
	}
	rate := float64(moved) / (dt / float64(time.Second))
	if b.limit > 0 {
		sh[BwLimit] = rate / float64(b.limit)
	}
	v := &Verdict{Shares: sh}
	switch {
	case b.active == 0:
		v.Resource, v.Why = Idle, "no stream is active"
	case b.limit > 0 && sh[BwLimit] >= atLimit:
		v.Resource, v.Why = BwLimit, fmt.Sprintf("the job moves %.0f%% of its bandwidth limit (--bwlimit %d bytes/s): raise the limit (PUT /bwlimit, SIGUSR2) to go faster, not -j", sh[BwLimit]*100, b.limit)
	case sh[SenderCPU] >= cpuSaturated:
		v.Resource, v.Why = SenderCPU, fmt.Sprintf("the sender uses %.0f%% of %d CPUs", sh[SenderCPU]*100, cores)
	case sh[ReceiverCPU] >= cpuSaturated:
		v.Resource, v.Why = ReceiverCPU, fmt.Sprintf("the receiver uses %.0f%% of its CPUs", sh[ReceiverCPU]*100)
	default:
		// The stream time that dominates. A receiver busy writing also
		// backs up the sender's socket: count its own time first.
		best, bv := Idle, 0.0
		for _, r := range []string{ReceiverWrite, SourceRead, Network, Latency} {
			if sh[r] > bv {
				best, bv = r, sh[r]
			}
		}
		if best == Network && sh[ReceiverWrite] >= busy {
			best = ReceiverWrite
		}
		v.Resource = best
		v.Why = fmt.Sprintf("streams spend %.0f%% of their time on %s", sh[best]*100, best)
		// Waiting for the disk or the server, file by file.
		switch {
		case best == SourceRead && b.srcLat >= ioconc.Slow:
			v.Resource = SourceLatency
			v.Why += fmt.Sprintf(", %v per file operation at the source: more operations at once (--io-concurrency) help", b.srcLat.Round(time.Microsecond))
		case best == ReceiverWrite && b.dstLat >= ioconc.Slow:
			v.Resource = DestLatency
			v.Why += fmt.Sprintf(", %v per file operation at the destination: more operations at once (--io-concurrency) help", b.dstLat.Round(time.Microsecond))
		}
	}
	// One more stream helps while no CPU is saturated: each stream is
	// serial (read, send, wait), so another one overlaps those waits, unless
	// the shared resource is already at its limit, which a CPU shows
	// directly and a link or a disk shows as every stream blocked on it.
	cpuFree := sh[SenderCPU] < 0.6 && sh[ReceiverCPU] < 0.6
	switch v.Resource {
	case SenderCPU, ReceiverCPU, Idle, SourceLatency, DestLatency, BwLimit:
		v.MoreStreamsHelp = false
	case Latency:
		v.MoreStreamsHelp = cpuFree || sh[SenderCPU] < cpuSaturated
	default:
		v.MoreStreamsHelp = cpuFree && sh[v.Resource] < 0.9
	}
	return v
}

// Watch recomputes the verdict every interval over a window of samples,
// until ctx ends. onChange is called (from Watch's goroutine) when the
// named resource changes.
func (j *Job) Watch(ctx context.Context, interval, window time.Duration, local bool, onChange func(*Verdict)) {
	cores := runtime.NumCPU()
	n := max(int(window/interval), 2)
	ring := []sample{j.snapshot()}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ring = append(ring, j.snapshot())
		if len(ring) > n {
			ring = ring[len(ring)-n:]
		}
		v := decide(ring[0], ring[len(ring)-1], cores, local)
		j.verdict.Store(v)
		if v.Resource != last && onChange != nil {
			onChange(v)
		}
		last = v.Resource
	}
}

// SetVerdict stores v as the latest verdict: one another process judged
// (a remote-to-remote move's box1, for the control host's exporter).
func (j *Job) SetVerdict(v *Verdict) { j.verdict.Store(v) }
