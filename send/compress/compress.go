package compress

// Compression of batch data (--compress).
//
// The sender chooses per stream and per batch, and names its choice in the
// batch's Data frame (wire.CodecZstd); the compressed tar travels in chunks
// (wire.ChunkWriter) so that the receiver's decoder, which reads ahead,
// never reads into the next frame. Each stream keeps one encoder and each
// agent session one decoder, reset per batch, both with concurrency 1 (a
// stream is one goroutine; K streams are the parallelism).
//
// Auto mode decides from the stream's own timing counters, batch by batch.
// Writing a batch takes wall = produce + blocked: produce is the CPU work
// (read, tar, hash, compress) and blocked the time writes to the
// connection waited (metrics.Stream.SendNanos). (The time the stream
// waited for the receiver's answers, its window full, is not counted:
// behind buffers of megabytes a slow link shows there first, but so does
// a receiver short of CPU on a fast one, and compressing for it only
// takes more CPU.) From these it keeps, per input
// byte, the cost of producing plain (pu) and compressed (pc) data, the
// link's cost per wire byte (when the writes block, wall/wire bytes;
// otherwise an upper bound), and the compression ratio r. A batch then
// takes about max(pu, link) plain and max(pc, link·r) compressed per byte;
// compression turns on when it would be faster by a margin and off when
// it would be slower by one (hysteresis); a plain batch whose writes did
// not block turns it off (the link keeps up with plain data). A stream
// starts plain: its first batch measures the link (the pool cuts the first
// batches small for that, send.Pool.Opening), unless the job's decision
// is to compress (AutoShare). (Starting compressed
// would spare that batch on a slow link, but writes that block while
// compressing do not tell a slow link from a receiver, or on a small
// machine an sshd, starved of CPU by the compressing: tried, it kept a
// direct link's copy compressed throughout and 60% slower.) Except over a
// far path (a network round trip of FarRTT or more): there the socket
// and channel buffers take the first megabytes of every stream at once,
// so its writes block only seconds in (some streams never), while
// compressing is still far faster than such a path; a far stream whose
// first sample compresses to farStart or less starts compressed, and
// turns it off the same ways.
// Decisions hold (hold): once a stream turned compression on or off, or
// changed its level, it changes again only after a dwell of its own time
// that doubles with each change, and turns compression off only when
// plain data would be faster by a wide margin (offMargin); a batch that
// went plain because its data does not compress turns nothing off. The
// job's last decision (AutoShare) is taken over by streams that have not
// decided yet: those -j auto adds, and those whose first batches the
// buffers took before their writes waited.
// While off on a link that is not the bottleneck nothing is sampled:
// compression could only cost there.
// While on and CPU-bound (writes waited linkWaits of the time or less:
// the link had room to spare), an occasional batch goes plain (a probe,
// ever rarer) so that a link that got faster is noticed; the probe goes on
// over the next batches until probeBytes have gone plain, and turns
// compression off only if, over them all, the writes did not block: one
// plain batch that the buffers took at once said nothing of the link (it
// turned every stream's compression off halfway through a copy over a
// far path, which then ran slower). Each batch compressed
// under auto is first sampled (64 KiB: the starts of up to 64 of its
// files, spread over the batch, at the level it would go at): data that
// does not compress (ratio above 0.9) goes plain.
//
// auto compresses each sample at the library's fastest and default
// levels, and the batch at the fastest unless that left the sample more
// than 8% larger (fastEnough) or the link sets the pace
// (autoPolicy.slowLink): the
// fastest level entropy-codes no literals where it finds few matches, so
// numbers, hex or log text without near repeats came out of it the size
// they went in, which `zstd -1` halves (64 KiB of `seq` output: fastest
// 100%, default 36%); on most text it is 3% larger and half again as fast.
//
// A third level, better, is taken on a stream that compresses while the
// link holds its writes back nearly all the time (betterEnter) and this
// host's CPUs have room: there the CPU it costs (about twice the default's)
// is time the stream would have spent waiting, and every byte it saves is
// time on the link. A sample cannot choose it: on 64 KiB it comes out the
// size of the default level, its gain is from the longer matches of a
// whole batch (bench/gentree's mixed tree, as one stream: fastest 0.417 of
// the input, default 0.403, better 0.389 at half the default's speed). It
// is left once the writes wait less than betterLeave of the time.

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// The modes of Config.Mode.
const (
	None = "none"
	Zstd = "zstd"
	Auto = "auto"
)

// Config is the sender's --compress choice.
type Config struct {
	Mode  string // None (or ""), Zstd or Auto
	Level int    // zstd level 1..22 for Zstd (0: the library's default, as auto uses)
}

// Parse parses "none", "auto", "zstd" or "zstd:LEVEL".
func Parse(s string) (Config, error) {
	mode, level, hasLevel := strings.Cut(s, ":")
	switch mode {
	case None, Auto:
		if hasLevel {
			return Config{}, fmt.Errorf("--compress %s takes no level", mode)
		}
		return Config{Mode: mode}, nil
	case Zstd:
		c := Config{Mode: mode}
		if hasLevel {
			n, err := strconv.Atoi(level)
			if err != nil || n < 1 || n > 22 {
				return Config{}, fmt.Errorf("--compress zstd:%s: the level is a number from 1 to 22", level)
			}
			c.Level = n
		}
		return c, nil
	}
	return Config{}, fmt.Errorf("--compress %q: want none, auto, zstd or zstd:LEVEL", s)
}

func (c Config) String() string {
	if c.Mode == Zstd && c.Level > 0 {
		return fmt.Sprintf("zstd:%d", c.Level)
	}
	if c.Mode == "" {
		return None
	}
	return c.Mode
}

// encoderLevel is zstd:LEVEL's level (auto has three: Stream.levels).
func (c Config) encoderLevel() zstd.EncoderLevel {
	if c.Level > 0 {
		return zstd.EncoderLevelFromZstd(c.Level)
	}
	return zstd.SpeedDefault
}

const (
	// encoderWindow is the zstd window the sender's encoder uses: within
	// wire.MaxZstdWindow, which receivers allow.
	encoderWindow = 4 << 20

	sampleBytes    = 64 << 10 // file data sampled per batch (auto)
	sampleFiles    = 64       // files opened for it at most
	incompressible = 0.9      // sample ratio above which a batch goes plain
	switchMargin   = 1.15     // compressing must be this much faster to turn on,
	offMargin      = 1.5      // and plain this much faster to leave the better level (see hold)
	firstProbe     = 8        // batches before the first plain probe while CPU-bound
	lastProbe      = 64       // ... and at most between two probes
	probeBytes     = 8 << 20  // input a probe sends plain before it judges
	farStart       = 0.6      // a far stream's first sample ratio to start compressed at
	// probeEvidence: a batch whose writes did not wait tells of the link
	// (a bound on its cost; for a compressed one, a step toward the next
	// probe) only if it put this much on the wire; less, the socket's and
	// the channel's buffers took at once, whatever the link. (The small
	// batches of a job's tail, split for balance, did not wait on a
	// 200 Mbit/s link the streams shared: their probes sent 9 MB plain
	// over it, 0.2 s more than compressed, and they had the link take
	// 170 MiB/s.)
	probeEvidence = 1 << 20
)

// FarRTT is the round trip from which a path is far: its buffers hide the
// link's rate from the first seconds of writes (here), and its streams are
// held by their windows rather than by CPU (-j auto).
const FarRTT = 10 * time.Millisecond

// Stream is one stream's compression state: its encoders and, under
// auto, its policy. Not safe for concurrent use: one per stream.
type Stream struct {
	cfg       Config
	enc       *zstd.Encoder             // zstd and zstd:LEVEL's encoder
	levels    [autoLevels]*zstd.Encoder // auto's, by level (autoDefault...)
	level     int                       // auto's level for the next batch
	auto      autoPolicy
	sample    []byte // the batch's sample, and
	sampleOut []byte // what it compressed to (buffers reused)
	logf      func(format string, args ...any)
	name      string
	far       bool       // the network round trip is FarRTT or more (send.Client.PathRTT)
	share     *AutoShare // the job's other streams, or nil
}

// NewStream returns the compression state of one stream: cfg is the
// job's choice, name and logf report its decisions (logf may be nil),
// share is what the job's streams tell each other under auto (may be
// nil), and far says the network round trip to the receiver is FarRTT or
// more.
func NewStream(cfg Config, name string, logf func(format string, args ...any), share *AutoShare, far bool) *Stream {
	return &Stream{cfg: cfg, logf: logf, name: name, share: share, far: far}
}

// SetHost tells the policy of this host before the next batch: whether
// its CPUs were hostcpu.Busy busy over the last batch, and whether
// --bwlimit fixes the wire's rate (see autoPolicy.busyHost).
func (d *Stream) SetHost(cpuBusy, limited bool) {
	d.auto.cpuBusy, d.auto.limited = cpuBusy, limited
}

// AutoShare is what the streams of one job tell each other under
// --compress auto: the job's decision, the last one a stream of it made
// (compression on, or off). A stream that joins the job (one -j auto
// adds, one reconnected) takes it over from its first batch: while the
// others compress it starts compressed, as over a far path, rather than
// sending a whole first batch plain over a link the others already fill
// to measure the link anew; and it holds that decision as its own (see
// hold). Its own measures may change it later, as any stream's.
type AutoShare struct {
	decision atomic.Int32 // shareNone, shareOn or shareOff
}

// The job's decisions (AutoShare.decision).
const (
	shareNone = iota
	shareOn
	shareOff
)

// jobOn reports whether the job's last decision is to compress.
func (s *AutoShare) jobOn() bool { return s != nil && s.decision.Load() == shareOn }

// decide records a stream's decision as the job's.
func (s *AutoShare) decide(on bool) {
	if s == nil {
		return
	}
	v := int32(shareOff)
	if on {
		v = shareOn
	}
	s.decision.Store(v)
}

// hold keeps a decision (compression on or off, a level) once made: it
// changes again only once the stream has spent dwell of its own time
// (the wall time of its batches) since, and each change doubles the
// dwell of the next, so that a stream whose measures sit near a threshold
// (data that compresses in some batches and not in others, a far path
// whose buffers take some batches at once) changes its mind a few times
// in a job, not at every batch: each change costs a batch sent the slower
// way, and every stream switching levels at once had the CPU use of a
// whole job double.
type hold struct {
	at    time.Duration // the stream's time at the last change
	dwell time.Duration // how long that change holds
	flips int           // changes so far
}

// minDwell is the first change's dwell; maxDwellShift bounds its doubling.
const (
	minDwell      = 2 * time.Second
	maxDwellShift = 6
)

// held says whether the last change still holds at the stream's time now.
func (h *hold) held(now time.Duration) bool { return now-h.at < h.dwell }

// change records a change at the stream's time now.
func (h *hold) change(now time.Duration) {
	h.flips++
	h.at = now
	h.dwell = minDwell << min(h.flips-1, maxDwellShift)
}

// Flips is how many times the stream turned compression on or off, and
// changed its level while on (for tests and the log).
func (d *Stream) Flips() (onOff, levels int) { return d.auto.onOff.flips, d.auto.lv.flips }

// auto's levels (Stream.levels): the first autoSampled are tried on
// each batch's sample.
const (
	autoDefault = iota
	autoFastest
	autoBetter
	autoLevels
	autoSampled = autoBetter
)

// autoLevelNames names auto's levels in the log.
var autoLevelNames = [autoLevels]string{"default", "fastest", "better"}

// autoZstd are auto's levels in the library's terms.
var autoZstd = [autoLevels]zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedFastest, zstd.SpeedBetterCompression}

// betterEnter and betterLeave: auto goes to the better level when a
// compressed batch's writes waited at least betterEnter of its time (at
// about twice the CPU they would still wait half of it), and back when
// they waited less than betterLeave.
const (
	betterEnter = 0.75
	betterLeave = 0.4
)

// fastEnough: auto compresses at the library's fastest level when a
// sample comes out of it at most this much larger than at the default
// level (or larger by at most 2% of the input, for data that compresses
// very well) and the link does not set the pace (autoPolicy.slowLink). On
// bench/gentree's mixed tree, fastest made 0.418 of the input at 106 MB/s
// a core, default 0.404 at 72 MB/s.
// Text without near repeats (numbers, hex) comes out of fastest whole
// (see the package comment): it stays at default.
const fastEnough = 1.08

// Encoder returns the stream's encoder for the next batch, created on
// first use.
func (d *Stream) Encoder() (*zstd.Encoder, error) {
	if d.cfg.Mode == Auto {
		return d.levelEncoder(d.level)
	}
	if d.enc == nil {
		enc, err := newEncoder(d.cfg.encoderLevel())
		if err != nil {
			return nil, err
		}
		d.enc = enc
	}
	return d.enc, nil
}

// levelEncoder returns auto's encoder of level l, created on first use.
func (d *Stream) levelEncoder(l int) (*zstd.Encoder, error) {
	if d.levels[l] == nil {
		enc, err := newEncoder(autoZstd[l])
		if err != nil {
			return nil, err
		}
		d.levels[l] = enc
	}
	return d.levels[l], nil
}

func newEncoder(l zstd.EncoderLevel) (*zstd.Encoder, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(encoderWindow))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc, nil
}

// Codec chooses how batch m goes: fixed by the mode, or (auto) by the
// policy and a sample of the batch.
func (d *Stream) Codec(src source.Source, m *wire.BatchManifest, need []bool) byte {
	switch d.cfg.Mode {
	case Zstd:
		if fileBytes(m, need) > 0 {
			return wire.CodecZstd
		}
		return wire.CodecNone
	case Auto:
	default:
		return wire.CodecNone
	}
	a := &d.auto
	// A far stream's first batch, or one of a stream that has not
	// decided yet (one that joined late, or whose buffers took its
	// batches so far) while the job's decision is to compress: see the
	// package comment and AutoShare.
	joined := !a.on && a.onOff.flips == 0 && d.share.jobOn()
	start := !a.on && (!a.seen && d.far || joined)
	if !a.on && !start && (!a.linkBound || a.busyHost() || a.onOff.held(a.clock)) {
		// The link keeps up, or this host's CPUs are busy: compression
		// could only cost. (Two hosts sharing their cores look like a
		// slow link whose far end is starved of CPU; compressing there
		// takes the CPU from it, and the copy runs slower.) Or the
		// stream turned it off a moment ago: hold.
		return wire.CodecNone
	}
	if a.on && (a.probe || a.probeIn <= 0 && !a.onOff.held(a.clock)) {
		a.probe = true
		return wire.CodecNone
	}
	ratio, nsPerByte, ok := d.trySample(src, m, need)
	if !ok || ratio > incompressible || start && !joined && ratio > farStart {
		return wire.CodecNone
	}
	if !a.on && start {
		a.ratio.add(ratio)
		a.on, a.probeIn, a.probeEvery = true, firstProbe, firstProbe
		if joined {
			// The job's decision, held as the stream's own (not a change).
			a.onOff.at, a.onOff.dwell = a.clock, minDwell
			d.log("compression on: the job's other streams compress; a sample compresses to %.0f%%", 100*ratio)
		} else {
			d.share.decide(true)
			d.log("compression on: a far path, whose buffers hide the link's rate at first; a sample compresses to %.0f%%", 100*ratio)
		}
		return wire.CodecZstd
	}
	if !a.on {
		a.ratio.add(ratio)
		pc := a.pc
		if !pc.ok {
			pc = ewma{v: a.pu.v + nsPerByte, ok: true}
		}
		tu, tc := a.costs(pc.v)
		if tc*switchMargin >= tu {
			return wire.CodecNone
		}
		d.turn(true)
		a.probeIn, a.probeEvery = firstProbe, firstProbe
		d.log("compression on: writes blocked %.0f%% of the time, the link takes %s; a sample compresses to %.0f%%",
			100*a.blocked, rateStr(a.link.v), 100*ratio)
	}
	return wire.CodecZstd
}

// turn turns compression on or off, held for a while (hold), and makes
// that the job's decision.
func (d *Stream) turn(on bool) {
	a := &d.auto
	a.on = on
	if !on {
		a.probe = false
	}
	a.onOff.change(a.clock)
	d.share.decide(on)
}

// trySample compresses a sample of the batch's file data at auto's
// levels and chooses the batch's level (fastEnough): the ratio and the
// cost in nanoseconds per input byte at that level.
func (d *Stream) trySample(src source.Source, m *wire.BatchManifest, need []bool) (ratio, nsPerByte float64, ok bool) {
	in := src.Sample(m, need, d.sample[:0], sampleBytes, sampleFiles)
	d.sample = in[:0]
	if len(in) < 512 {
		return 0, 0, false
	}
	var ratios, costs [autoSampled]float64
	for l := range autoSampled {
		enc, err := d.levelEncoder(l)
		if err != nil {
			return 0, 0, false
		}
		var took time.Duration
		took, d.sampleOut = cpuTimed(func() []byte { return enc.EncodeAll(in, d.sampleOut[:0]) })
		ratios[l] = float64(len(d.sampleOut)) / float64(len(in))
		costs[l] = float64(took) / float64(len(in))
	}
	level := d.pickLevel(ratios[autoFastest], ratios[autoDefault])
	sampled := level
	if level == autoDefault && d.auto.roomForBetter(d.level == autoBetter) {
		level = autoBetter
	}
	if level != d.level && d.auto.on && d.auto.lv.held(d.auto.clock) {
		level = d.level // the last change holds (see hold)
	}
	if level != d.level && d.auto.on {
		d.auto.lv.change(d.auto.clock)
		switch {
		case level == autoBetter:
			d.log("zstd level better: the link held the writes back %.0f%% of the time", 100*d.auto.waits)
		case d.level == autoBetter && level == autoDefault && d.auto.cpuBusy:
			d.log("zstd level default: this host's CPUs are busy")
		case d.level == autoBetter && level == autoDefault:
			d.log("zstd level default: the link held the writes back only %.0f%% of the time", 100*d.auto.waits)
		case level == autoDefault && d.auto.slowLink:
			// Not the sample's doing (see pickLevel): say what moved it.
			d.log("zstd level default: the link sets the pace (it held the writes back %.0f%% of the time)", 100*d.auto.waits)
		default:
			d.log("zstd level %s: a sample compresses to %.0f%% at the fastest level, %.0f%% at the default",
				autoLevelNames[level], 100*ratios[autoFastest], 100*ratios[autoDefault])
		}
	}
	d.setLevel(level)
	return ratios[sampled], costs[sampled], true
}

// pickLevel chooses between the fastest and the default level from a
// sample's ratios at each: fastest, unless it leaves the data much larger
// (fastEnough), or the link sets the pace (then fewer bytes are what
// counts). The ratios are averaged over the stream's samples, and the
// level it has holds unless the average moves past fastEnough by
// levelMargin: a tree whose files differ (the half-and-half tree's
// samples came out of fastest 2% to 16% larger than out of default, a
// sample to the next) changed levels a few times a stream, each change
// a batch or two at the other level's cost, and no step gained.
func (d *Stream) pickLevel(fastest, dflt float64) int {
	a := &d.auto
	a.fastR.add(fastest)
	a.dfltR.add(dflt)
	if a.slowLink {
		return autoDefault
	}
	bar := fastEnough
	switch {
	case !a.leveled:
		a.leveled = true
		// The first sample decides alone.
		a.fastR, a.dfltR = ewma{v: fastest, ok: true}, ewma{v: dflt, ok: true}
	case d.level == autoFastest:
		bar += levelMargin
	default:
		bar -= levelMargin
	}
	f, df := a.fastR.v, a.dfltR.v
	if f > max(bar*df, df+0.02) {
		return autoDefault
	}
	return autoFastest
}

// levelMargin is how far past fastEnough the averaged ratio of fastest's
// output to default's must move for a stream to change between the two.
const levelMargin = 0.04

// setLevel makes level auto's level for the next batch.
func (d *Stream) setLevel(level int) {
	if d.level == autoBetter && level != autoBetter && d.levels[autoBetter] != nil {
		// Its tables and window (about 12 MiB) are held only while in use.
		d.levels[autoBetter].Close()
		d.levels[autoBetter] = nil
	}
	d.level = level
}

// roomForBetter says whether the stream, compressing, has the CPU to spare
// for the better level (see the package comment): the link sets its pace
// and held its last batch's writes back betterEnter of the time (at the
// better level already: betterLeave), and this host's CPUs have room,
// under --bwlimit too: the better level costs twice the CPU, and
// --bwlimit is how a live system is spared.
func (a *autoPolicy) roomForBetter(atBetter bool) bool {
	share := betterEnter
	if atBetter {
		share = betterLeave
	}
	return a.on && a.slowLink && !a.cpuBusy && a.waits >= share
}

// busyHost says whether this host's CPUs were too busy over the last
// batch to start compressing; never under --bwlimit, where the wire's
// rate is fixed: compressing fits more into it, whatever else the CPUs do.
func (a *autoPolicy) busyHost() bool { return a.cpuBusy && !a.limited }

// cpuTimed runs f on a thread of its own and returns the CPU time it took
// (the wall time where the thread's clock cannot be read). Timed by the
// wall, a sample compressed while other processes had the CPUs looked
// many times as costly, and a stream whose writes were blocked nearly all
// the time kept sending plain batches because compressing its sample had
// "cost" more than the link saved.
func cpuTimed(f func() []byte) (time.Duration, []byte) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var t0, t1 unix.Timespec
	start := time.Now()
	ok := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0) == nil
	out := f()
	if ok && unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1) == nil {
		return time.Duration(t1.Nano() - t0.Nano()), out
	}
	return time.Since(start), out
}

// Observe feeds the policy with how batch data went: in tar bytes became
// out bytes on the wire in wall time, of which blocked were writes
// waiting; recvWrite is the receiver's share of the time spent writing,
// recvCPU its process's CPU use in cores.
func (d *Stream) Observe(codec byte, in, out int64, wall, blocked time.Duration, recvWrite, recvCPU float64) {
	if d.cfg.Mode != Auto || in <= 0 || out <= 0 {
		return
	}
	a := &d.auto
	a.seen = true
	a.clock += wall
	if in < 256<<10 && wall < 20*time.Millisecond {
		return // too little to measure
	}
	a.blocked = float64(blocked) / float64(wall)
	a.linkBound = linkBound(blocked, wall, recvWrite, recvCPU)
	// Over a far path a stream's writes wait on its windows (a window
	// a round trip) while the link has room: only writes that waited
	// nearly all the time tell there that the link sets the pace.
	waited := a.linkBound
	switch {
	case d.far:
		a.slowLink = a.linkBound && a.blocked > 0.9
	case a.linkBound:
		a.slowLink = true
	case !waitedOnLink(blocked, wall, recvWrite, recvCPU, linkWaits):
		// (A batch smaller than the buffers tells nothing of the link:
		// probeEvidence.)
		if out >= probeEvidence {
			a.slowLink = false
		}
		waited = false
	default:
		waited = true
	}
	if out >= probeEvidence || a.blocked > linkWaits {
		a.waits = a.blocked
	}
	produce := float64(wall-blocked) / float64(in)
	if a.linkBound {
		if !a.linkMeasured {
			a.link = ewma{} // a bound only: not to be averaged in
		}
		a.link.add(float64(wall) / float64(out))
		a.linkMeasured = true
	} else if bound := float64(wall) / float64(out); !d.far && out >= probeEvidence && (!a.link.ok || bound < a.link.v) {
		// The link took at least this rate (over a far path, or for a
		// batch smaller than the buffers, the buffers took it: no
		// bound).
		a.link = ewma{v: bound, ok: true}
		a.linkMeasured = false
	}
	if codec == wire.CodecZstd {
		a.pc.add(produce)
		a.ratio.add(float64(out) / float64(in))
	} else {
		a.pu.add(produce)
	}
	if !a.on {
		return
	}
	if codec == wire.CodecNone && a.probe {
		a.probeSent += in
		a.probeWall += wall
		a.probeBlocked += blocked
		if a.probeSent < probeBytes {
			return // the probe goes on
		}
		a.linkBound = linkBound(a.probeBlocked, a.probeWall, recvWrite, recvCPU)
		a.probeSent, a.probeWall, a.probeBlocked = 0, 0, 0
	}
	if codec == wire.CodecNone && !a.probe {
		// A batch that went plain for its sample (data that does not
		// compress) tells of that data, not of what compressing gains:
		// only a probe turns compression off. (Such batches turned it
		// off, and their successors on again, a dozen times a stream.)
		return
	}
	if codec == wire.CodecNone && !a.linkBound {
		// Plain data went as fast as the stream made it: compression
		// cannot beat that.
		d.turn(false)
		d.log("compression off: the link takes plain data as fast as the stream makes it (%s)", rateStr(a.pu.v))
		return
	}
	if codec == wire.CodecZstd && !waited && out >= probeEvidence {
		a.probeIn--
	}
	tu, tc := a.costs(a.pc.v)
	if a.probe {
		a.probe = false
		a.probeEvery = min(a.probeEvery*2, lastProbe)
		a.probeIn = a.probeEvery
	}
	// (With no measure of the link yet, over a far path or on a stream
	// that joined compressed, plain data has no known cost to weigh
	// compressing against.)
	if a.pc.ok && a.link.ok && tu*offMargin < tc && d.level == autoBetter {
		// CPU-bound at the better level, which costs twice the default's
		// CPU: a step down. (Compression itself is turned off only by a
		// probe, which measures what the link takes plain: estimated
		// from costs measured at different times, on a host whose load
		// changed between them, it turned compression off on a link that
		// plain data then flooded.)
		d.setLevel(autoDefault)
		a.pc = ewma{}
		a.lv.change(a.clock)
		d.log("zstd level default: CPU-bound at the better level, compressing takes %s of data", rateStr(tc))
	}
}

// linkBound says whether writes that waited blocked of wall waited on the
// link. Writes that wait on a receiver busy writing its disk, or with a
// core's worth of CPU, are not a slow link: compression would not help
// them (it adds to the receiver's work).
func linkBound(blocked, wall time.Duration, recvWrite, recvCPU float64) bool {
	return waitedOnLink(blocked, wall, recvWrite, recvCPU, 0.25)
}

// linkWaits is the share of a batch's time its writes must wait on the
// link to tell that the link has no room to spare (autoPolicy.slowLink).
const linkWaits = 0.05

// waitedOnLink says whether writes that waited blocked of wall waited on
// the link for more than share of it.
func waitedOnLink(blocked, wall time.Duration, recvWrite, recvCPU, share float64) bool {
	return float64(blocked) > share*float64(wall) && recvWrite < 0.5 && recvCPU < 0.9
}

func (d *Stream) log(format string, args ...any) {
	if d.logf != nil {
		d.logf("%s: "+format, append([]any{d.name}, args...)...)
	}
}

// rateStr formats a cost in nanoseconds per byte as a rate: "12 MiB/s".
func rateStr(nsPerByte float64) string {
	if nsPerByte <= 0 || 1e9/nsPerByte >= math.MaxInt64 {
		return "∞"
	}
	return units.Rate(int64(1e9 / nsPerByte))
}

// autoPolicy is auto mode's state: see the package comment above.
type autoPolicy struct {
	on        bool
	seen      bool // a batch was observed
	linkBound bool // the last batch's writes waited on the link
	// slowLink: the link, not this host's CPU, sets the stream's pace:
	// set by a batch whose writes waited on it (linkBound), cleared by
	// one whose writes waited linkWaits of the time or less. A stream
	// between the two (at the default level, on a slow link the job's
	// streams fill together, its writes wait a fraction of the time)
	// keeps its level and sends no probe: the link had
	// no room for more compressed data, so none for plain data either.
	// Over a far path: while the writes wait 90% of the time (see
	// observe).
	slowLink bool
	cpuBusy  bool // this host's CPUs were hostcpu.Busy busy over the last batch
	// clock is the stream's time: the wall time of the batches it
	// observed; onOff and lv hold its last decisions on it (see hold).
	clock     time.Duration
	onOff, lv hold
	limited   bool // --bwlimit fixes the wire's rate (see busyHost)
	// linkMeasured: link holds what batches that waited on the link
	// took, not a bound from one that did not wait.
	linkMeasured bool
	blocked      float64 // the last batch's share of time blocked writing
	// waits: the same of the last batch that tells of the link: one that
	// waited, or one larger than the buffers (probeEvidence).
	waits      float64
	probe      bool // this batch is a plain probe
	probeIn    int  // compressed CPU-bound batches until the next probe
	probeEvery int
	// The probe's plain input so far, its wall time and how long of it
	// its writes were blocked.
	probeSent               int64
	probeWall, probeBlocked time.Duration
	pu, pc                  ewma // ns per input byte to produce plain / compressed data
	link                    ewma // ns per wire byte the link takes
	ratio                   ewma // wire bytes per input byte, compressed
	// fastR and dfltR: the samples' ratios at the fastest and the default
	// level, averaged (pickLevel); leveled: a sample chose a level.
	fastR, dfltR ewma
	leveled      bool
}

// costs estimates the ns per input byte of a plain and of a compressed
// batch, pc being the cost of producing compressed data.
func (a *autoPolicy) costs(pc float64) (plain, compressed float64) {
	r := 1.0
	if a.ratio.ok {
		r = a.ratio.v
	}
	return math.Max(a.pu.v, a.link.v), math.Max(pc, a.link.v*r)
}

// ewma is an exponentially weighted mean.
type ewma struct {
	v  float64
	ok bool
}

func (e *ewma) add(x float64) {
	if !e.ok {
		e.v, e.ok = x, true
		return
	}
	e.v = 0.6*e.v + 0.4*x
}

// fileBytes is the size of the files of m that are sent.
func fileBytes(m *wire.BatchManifest, need []bool) int64 {
	var n int64
	for i := range m.Entries {
		if m.Entries[i].Kind == model.KindFile && need[i] {
			n += m.Entries[i].Size
		}
	}
	return n
}
