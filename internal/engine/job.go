package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/engine/deletion"
	"github.com/bulkmove/bulkmove/internal/engine/resume"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/itemize"
	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/compress"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/accepted"
	"github.com/bulkmove/bulkmove/transport/sshx"
)

// job is one run of the main command. Its state is split by concern:
// where it reads and writes (target), how it opens more streams (dialer),
// what the controllers steer (control), and what it counted (tally) for
// the summary; each embedded, so that the methods of each concern, in the
// files of that concern, name their fields directly. --delete keeps its
// own (del).
type job struct {
	flags          Config
	stdin          io.Reader
	stdout, stderr io.Writer
	src, dst       string
	start          time.Time
	ev             *events                       // --json; nil otherwise
	failure        error                         // why the job stopped before its end event (fail)
	m              *metrics.Job                  // what the job measures, for -v, --json and the metrics endpoint
	res            *resume.Journal               // the journal; nil without one
	exitCode       func(Outcome) int             // the exit code of an outcome, for --json
	del            *deletion.Deleter             // --delete; nil without
	rm             *srcRemover                   // --remove-source-files; nil without
	out, logFmt    *itemize.Format               // -i (--out-format) and --log-file-format; nil without
	log            io.Writer                     // where --log-file's item lines go (Job.Log)
	logged         *Logged                       // what they counted (Job.Logged); nil: not counted
	statsOut       io.Writer                     // where --stats' block goes: stdout, a pull's sender's stderr
	srcFile        bool                          // SRC is a single file: %f is SRC itself
	pulling        bool                          // a pull: items are received (%o recv), %f names DEST's
	walked         atomic.Pointer[sharder.Stats] // what the walk found, once it is over (--stats)

	// What the caller follows the job by: Job.Trace and Job.Watch (nil:
	// nothing).
	debug          io.Writer
	watch          func(*metrics.Job) (stop func())
	remoteProgress func() (show func(progressline.Job), stop func())
	r2rLimit       *r2rLimit // a remote-to-remote move's /bwlimit on the control host
	// verifyAs is what a remote-to-remote verify asks of box1: "content"
	// or "meta" (verify --no-content); "" for a move.
	verifyAs string

	target
	dialer
	control
	tally
}

// target is where the job reads and writes, beyond its SRC and DEST
// arguments.
type target struct {
	remote    *sshx.Target      // DEST's host, nil for a local DEST
	serveAddr string            // DEST is bulkmove://serveAddr/...
	hub       []accepted.Stream // send-hub: the streams the receiver opened
	as        string            // send-hub: the name of a single-file SRC at the receiver
	direct    *directDest       // DEST is an agent's data plane another host started (R2RSender)
	// await, if set, gives the path to DEST once the control host has
	// found one (R2RSender): the job walks while it waits.
	await func(context.Context) (r2rPath, error)
}

// dialer is the job's transport, chosen once (connect): it opened the K
// streams, and opens others after them where it can (Caps).
type dialer struct {
	tr transport.Transport
}

// control is the state the controllers and the caller's requests share
// with the streams: the bandwidth limit, the space check, --compress
// auto, the graceful stop.
type control struct {
	bw          *throttle.Control  // the bandwidth limit (bwlimit.go)
	share       compress.AutoShare // --compress auto: what the streams tell each other
	free        atomic.Int64       // free space at DEST, 0 if unknown
	spaceWarned atomic.Bool
	stopWalk    context.CancelCauseFunc // ends the walk with a cause
	drain       <-chan struct{}         // Job.Drain: closed to stop gracefully
	asks        <-chan throttle.Request // Job.Limit: halve or double the bandwidth limit
}

// draining says whether the job was asked to stop gracefully (Job.Drain).
func (c *control) draining() bool {
	select {
	case <-c.drain:
		return true
	default:
		return false
	}
}

// tally is what the job counted, for its summary and exit code; mu
// guards it.
type tally struct {
	mu       sync.Mutex
	files    int64 // regular files installed
	bytes    int64
	links    int64 // symlinks, hard links, directories, devices and special files applied
	skipped  int64 // up to date already
	resumed  int64 // of those, named by the resume journal
	resent   int64 // files the resume journal named that DEST did not hold as sent
	changed  int64 // files that changed while read, twice
	saved    int64 // bytes the block delta did not send (the blocks DEST had)
	failed   int64 // entries that could not be moved
	walkErrs int64
	warnings int64
	rs       rsyncTally // --stats (stats.go)
}

func (j *job) run(ctx context.Context) Outcome {
	j.start = time.Now()
	if j.hub == nil {
		t, remote, err := sshx.ParseTarget(j.src)
		if err != nil {
			return j.fail(UsageError, err)
		}
		if remote {
			if d, r, err := sshx.ParseTarget(j.dst); r && err == nil {
				return j.remoteToRemote(ctx, t, d)
			}
			return j.pull(ctx, t)
		}
	}
	plan, code := j.resolve(ctx)
	if code != Done {
		return code
	}
	j.flags.Faithful.source(&plan.src)
	j.flags.Owners.source(&plan.src)
	j.flags.Select.source(&plan.src)
	plan.src.FakeSuper, _ = j.fakeSuper()
	j.autoStart()
	plan.src.IO = j.flags.IOConcurrency.gauge()
	opt := sharder.Options{
		BatchBytes:    int64(j.flags.BatchSize),
		BatchFiles:    j.flags.BatchFiles,
		Filter:        j.flags.Rules,
		OneFileSystem: j.flags.OneFS,
		Concurrency:   int(j.flags.IOConcurrency),
		IO:            plan.src.IO,
		OnError: func(p string, err error) {
			j.mu.Lock()
			j.walkErrs++
			j.mu.Unlock()
			termsafe.Errorf(j.stderr, "%v", err)
			j.logFailed(p, err)
			j.ev.problem("error", p, err.Error())
		},
		OnWarn: func(p, msg string) {
			j.mu.Lock()
			j.warnings++
			j.mu.Unlock()
			termsafe.Errorf(j.stderr, "warning: %s: %s", filepath.Join(j.src, filepath.FromSlash(p)), msg)
			j.ev.problem("warning", p, msg)
		},
	}
	if plan.src.File != "" {
		opt.Name = filepath.Base(j.src) // a symlink's name, if SRC is one
		j.srcFile = true
	}
	j.flags.Faithful.walk(&opt)
	j.flags.Select.walk(&opt)
	opt.FakeSuper, _ = j.fakeSuper()
	j.flags.Split.apply(&opt, &j.flags)
	linkMem, err := EnvCount("BULKMOVE_TUNE_LINK_MEM", "hard-link sets")
	if err != nil {
		return j.fail(UsageError, err)
	}
	opt.LinkMem = int(linkMem)
	closeList, err := j.flags.Scale.apply(&opt, j.stdin)
	if err != nil {
		return j.fail(Failed, err)
	}
	defer closeList()
	if j.flags.DryRun {
		o := j.dryRun(ctx, plan, opt)
		j.printStats()
		return o
	}

	res, jerr := j.openJournal()
	if jerr != nil {
		return j.fail(Failed, jerr)
	}
	j.res = res
	j.ev.start(j)
	// The walk starts at once, while the streams connect: on a pass over
	// an unchanged tree it is most of the work.
	// Directories, symlinks and hard links wait for the end; beyond what
	// memory holds they wait on disk, beside the journal if there is one
	// (TMPDIR is often a tmpfs: memory again).
	def := &send.Deferred{Dir: j.res.Dir()}
	defer def.Close()
	opt.Deferred = def.Add
	opt.SpillDir = j.res.Dir() // and so do the names of hard-linked files past LinkMem open sets
	// Room for the walk to run ahead while the streams connect (about
	// 150 KiB a batch of 1,000 small files, their names included: 10 MiB
	// at most). More lets a fast walk fill memory, not the streams, which
	// drain it in a fraction of a second once connected.
	batches := make(chan *model.Batch, 2*j.flags.Jobs+64)
	// Whether to spread batches over directories: the receivers say once
	// connected (the walk holds a few thousand files until then).
	spread := make(chan bool, 1)
	opt.Spread = spread
	j.m = j.newMetrics()
	if sh := j.flags.Scale.Shard; !sh.All() {
		j.m.Shard = sh.String() // a shard label on the job's metrics
	}
	j.m.SourceLatency = plan.src.IO.Latency
	defer j.limit(&plan)()
	wctx, stopWalkCause := context.WithCancelCause(ctx)
	stopWalk := func() { stopWalkCause(nil) }
	defer stopWalk()
	j.stopWalk = stopWalkCause
	g, gctx := errgroup.WithContext(wctx)
	g.Go(func() error {
		st, err := sharder.Run(gctx, plan.walkRoot, opt, j.relay(gctx, batches, plan.rename))
		j.walked.Store(&st)
		j.m.WalkDone.Store(true)
		if cause := context.Cause(gctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause // the walk was stopped for a reason (--require-space)
		}
		if err != nil && !(j.draining() && errors.Is(err, context.Canceled)) {
			return fmt.Errorf("walk %s: %w", j.src, err)
		}
		return nil
	})
	conns, cleanup, err := j.connect(ctx, plan)
	if err != nil {
		j.res.Unbind()
		stopWalk()
		g.Wait()
		j.res.Close(false)
		return j.fail(Failed, err)
	}
	defer cleanup()
	late := j.pending()
	if late > 0 {
		j.trace("connected %d streams, %d more joining", len(conns), late)
	} else {
		j.trace("connected %d streams", len(conns))
	}
	j.warnDenied(conns)
	slow, destID := destSays(conns)
	if err := j.res.Bind(destID, j.dst, j.stderr, j.trace); err != nil {
		termsafe.Errorf(j.stderr, "warning: %v; this run leaves out nothing the journal holds", err)
	}
	if slow {
		j.trace("DEST answers each file operation after a round trip: batches take their files from many directories in turn")
	}
	spread <- slow
	j.free.Store(destFree(conns, plan.dstRoot))
	if err := j.checkSpace(j.m.PlannedBytes.Load()); err != nil {
		// What the walk found while connecting is already too much.
		stopWalk()
		g.Wait()
		j.res.Close(false)
		return j.fail(Failed, err)
	}
	j.connected(len(conns) + late)
	pool := &send.Pool{Conns: conns, FinalFiles: j.flags.BatchFiles, OnResult: j.onResult, Counters: j.m.Streams, Limit: j.bw.Bucket(),
		OnPhase: func(name string) { j.trace("%s", name) }}
	if late > 0 {
		pool.Join, pool.AddConn, pool.MaxConns = late, j.tr.Add, len(conns)+late
	}
	if j.flags.Delete && plan.rename == "" {
		j.del = j.deleter(plan)
		if j.flags.RemoveSourceFiles {
			// Each file sent leaves SRC once its batch is acknowledged:
			// a listing of SRC after the data would lack them, and the
			// pass would delete at DEST the files just moved there. So
			// SRC is listed before any leaves (rsync's --delete-before).
			pool.BeforeData = j.del.Pass
		} else {
			pool.BeforeFinal = j.del.Pass
		}
	}
	if j.flags.Compress.Mode == compress.Auto && slices.ContainsFunc(conns, isClient) {
		pool.Opening = openingCost // the first batches measure the link
	}
	pool.Retries, pool.ReconnectTimeout = j.flags.Retries, j.flags.ReconnectTimeout
	if j.flags.ReconnectTimeout > 0 && j.tr.Caps().Redial {
		pool.Redial = j.tr.Redial
	}
	pool.OnWarn = func(msg string) { termsafe.Errorf(j.stderr, "warning: %s", msg) }
	if j.flags.RemoveSourceFiles {
		j.rm = j.newRemover(plan)
	}
	if plan.src.File == "" {
		root := plan.src.Root
		pool.Restat = func(e model.Entry) (model.Entry, bool) { return sharder.Restat(root, e) }
	}
	stopProgress := func() {}
	if j.watch != nil {
		stopProgress = j.watch(j.m) // before anything else writes to stderr
	}
	stopObs, err := j.observe(ctx, j.remote == nil && j.hub == nil && !j.flags.ViaAgent)
	if err != nil {
		stopProgress()
		return j.fail(UsageError, err)
	}
	pool.Drain = j.drain
	stopAuto := j.steer(gctx, pool, j.remote == nil && j.hub == nil && !j.flags.ViaAgent)
	g.Go(func() error {
		err := pool.Run(gctx, batches, def)
		if j.draining() {
			stopWalk() // the pool took what it will: the walk can stop
		}
		return err
	})
	err = g.Wait()
	if cause := context.Cause(wctx); cause != nil && !errors.Is(cause, context.Canceled) && errors.Is(err, context.Canceled) {
		// The walk was stopped for a reason (--require-space), and the
		// pool, cancelled with it, may have returned first.
		err = cause
	}
	stopAuto()
	stopObs()
	stopProgress()
	if j.flags.Verbose {
		for i, s := range pool.Stats() {
			by := ""
			if i < len(j.m.Streams) {
				if n := j.m.Streams[i].SendfileBytes.Load(); n > 0 {
					by = fmt.Sprintf(" (%s by sendfile)", units.Size(n))
				}
			}
			termsafe.Errorf(j.stderr, "stream %d: %d batches, %d files, %s%s, busy until %.2fs", i, s.Batches, s.Files, units.Size(s.Bytes), by, s.Done.Seconds())
		}
	}
	interrupted := ctx.Err() != nil || j.draining()
	j.finishRemove(err == nil && !interrupted && j.failed == 0 && j.walkErrs == 0)
	if jerr := j.res.Close(err == nil && !interrupted && j.failed == 0 && j.walkErrs == 0); jerr != nil {
		termsafe.Errorf(j.stderr, "warning: %v", jerr)
	}
	j.summary(err, interrupted)
	j.printStats()
	exit := Done
	del := j.del.Stats()
	switch {
	case interrupted:
		exit = Interrupted
	case err != nil || del.Refused:
		exit = Failed
	case j.failed > 0 || j.walkErrs > 0:
		exit = Partial
	case del.Held > 0:
		exit = MaxDeleteHeld
	}
	j.end(pool, err, j.code(exit))
	return exit
}

// trace reports, with -v, the time since the start at which the job
// reached a phase.
func (j *job) trace(format string, args ...any) {
	args = append([]any{time.Since(j.start).Seconds()}, args...)
	switch {
	case j.flags.Verbose:
		termsafe.Errorf(j.stderr, "%6.3fs "+format, args...)
	case j.debug != nil:
		termsafe.Errorf(j.debug, "%6.3fs "+format, args...)
	}
}
