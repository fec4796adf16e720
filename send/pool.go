package send

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// StreamStats is one stream's share of the work.
type StreamStats struct {
	Batches int64
	Files   int64
	Bytes   int64
	Busy    time.Duration // when its last batch was acknowledged, since the start
	Done    time.Duration // when it finished its last file batch, since the start
}

// Pool runs a job over K streams.
type Pool struct {
	Conns      []Conn
	FinalFiles int               // entries per final batch (default 2000)
	OnResult   func(Result)      // called for every acknowledged batch, serialised
	OnPhase    func(name string) // called as the job passes each phase (for -v)
	// BeforeFinal, if set, runs after the file data and hard links, before
	// symlinks and directory metadata (which a deletion would disturb):
	// the --delete pass.
	BeforeFinal func(ctx context.Context, conns []Conn) error
	// BeforeData, if set, runs before any batch is sent: the --delete
	// pass of a job whose sent files leave SRC (--remove-source-files),
	// which after the data would find them gone from SRC.
	BeforeData func(ctx context.Context, conns []Conn) error
	// Counters has one entry per stream; Run allocates them if nil.
	Counters []*Counters
	// Limit, if set, is the job's bandwidth limit: every stream that
	// implements Limited (reconnected ones too) draws from this one
	// bucket, so the streams share the rate between them.
	Limit *ratelimit.Bucket
	// Restat, if set, looks a file that changed while it was read up
	// again at the source: the pool sends it once more, after the other
	// files, with what Restat returns (ok false: not again). A file that
	// changes during that second read too is reported (source.ErrChanged).
	Restat func(e model.Entry) (model.Entry, bool)
	// Redial, if set, opens stream i again after it failed with a
	// retryable error (see Retryable). Without it a failed stream stops
	// and the others take over its batches.
	Redial func(ctx context.Context, i int) (Conn, error)
	// Retries is how often one batch may be in flight on a stream that
	// failed before the job gives up (default 5).
	Retries int
	// ReconnectTimeout bounds how long a stream tries to reconnect
	// (default 5 minutes); then it stops, and the job goes on without it.
	ReconnectTimeout time.Duration
	// OnWarn reports a stream lost, reconnected or given up.
	OnWarn func(msg string)
	// Drain, when closed, stops the job gracefully: no new batch is
	// handed out, those in flight finish, the deferred entries wait for
	// the next run, and the streams are closed.
	Drain <-chan struct{}
	// AddConn, if set, opens one more stream while the job sends file
	// data (Grow, for -j auto); i is the index it will likely have.
	AddConn func(ctx context.Context, i int) (Conn, error)
	// MaxConns bounds the streams Grow adds up to; 0 (or fewer than the
	// streams Run starts with and Join adds) lets Grow add none: the
	// streams' counters are sized once, when Run starts.
	MaxConns int
	// Join is how many more streams the job opens with AddConn as soon as
	// Run's streams run, streams the transport was still connecting when
	// Run began (over a long path the first stream sends meanwhile). They
	// are the job's own, never retired.
	Join int
	// Opening, if positive, is the most a batch may weigh (see cost)
	// among the first ones handed out (openingBatches): a stream's first
	// batch is what --compress auto measures the link with, and it goes
	// plain: on a slow link a whole first batch of the default size holds
	// each stream back for a second or more before its compression
	// comes on.
	Opening int64

	joining   sync.WaitGroup // the Join streams being opened
	resize    sync.Mutex     // Grow and Retire, one at a time
	grow      growable       // phase 1, for Grow (poolgrow.go)
	running   chan struct{}  // closed once Grow may add streams, or never will (Running)
	mu        sync.Mutex
	stats     []StreamStats
	owner     *spill.List[owned] // hard-link targets: the stream that wrote or verified each, sorted by path
	linking   bool               // the hard-link phase reads owner: targets sent again are not added
	epoch     []int              // per stream: reconnections so far
	jobCtx    context.Context    // what reconnected streams live in
	fatal     error
	nextID    uint64            // ids of final batches
	parts     map[uint64]uint64 // per batch of the walk split: its parts so far (batchname.Part)
	nextSplit uint64            // ids of parts whose own do not fit (batchname.SplitOther)
	retries   []model.Entry
	requeue   chan *model.Batch // batches of a failed stream, for the others
	settled   chan struct{}     // an outstanding batch was acknowledged or requeued
	pending   int               // batches handed out, neither acknowledged nor requeued
	attempts  map[uint64]int    // per batch: streams that failed with it
	live      int               // streams not given up
	down      []bool            // streams given up
	started   time.Time
}

// ErrNoSpace marks a receiver out of space or quota: the job stops.
var ErrNoSpace = errors.New("no space left on the destination")

// Stats returns per-stream statistics.
func (p *Pool) Stats() []StreamStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.stats)
}

// Run moves every batch from in, then the deferred entries, then closes
// the streams. It returns the first fatal error; per-entry failures are
// reported through OnResult and do not stop the job.
func (p *Pool) Run(ctx context.Context, in <-chan *model.Batch, def *Deferred) error {
	if len(p.Conns) == 0 {
		return errors.New("no streams")
	}
	if p.FinalFiles <= 0 {
		p.FinalFiles = 2000
	}
	p.stats = make([]StreamStats, len(p.Conns))
	p.MaxConns = max(p.MaxConns, len(p.Conns)+p.Join)
	most := p.MaxConns
	if len(p.Counters) < most { // room for the streams Grow and Join add
		p.Counters = make([]*Counters, most)
		for i := range p.Counters {
			p.Counters[i] = &Counters{}
		}
	}
	for i, c := range p.Conns {
		p.attach(i, c)
		if rc, ok := c.(Receiving); ok {
			if id := rc.ReceiverProcess(); id != "" {
				p.Counters[i].RecvProcess.Store(&id)
			}
		}
	}
	if def == nil {
		def = &Deferred{}
	}
	p.owner = spill.New(def.Dir, def.Mem, byTarget, ownedCodec{})
	defer p.owner.Close()
	p.epoch = make([]int, len(p.Conns))
	p.nextID = 1 << 62
	p.nextSplit = batchname.SplitOther
	p.started = time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer func() {
		cancel(nil)
		p.joining.Wait() // ends with ctx
	}()
	p.jobCtx = ctx

	if p.Retries <= 0 {
		p.Retries = 5
	}
	if p.ReconnectTimeout <= 0 {
		p.ReconnectTimeout = 5 * time.Minute
	}
	p.requeue = make(chan *model.Batch, most*(wire.Window+4))
	p.settled = make(chan struct{}, 1)
	p.attempts = map[uint64]int{}
	p.live = len(p.Conns)
	p.down = make([]bool, len(p.Conns))

	if p.BeforeData != nil {
		if err := p.BeforeData(ctx, p.Conns); err != nil {
			p.closeAll(ctx)
			return err
		}
	}
	// Phase 1: file data, every stream pulling from one queue.
	g, gctx := errgroup.WithContext(ctx)
	queue := make(chan *model.Batch)
	walked := in
	in = queue
	for i := range p.Conns {
		g.Go(func() error {
			p.Counters[i].Active.Store(true)
			defer p.Counters[i].Active.Store(false)
			err := p.stream(gctx, i, in, cancel)
			p.mu.Lock()
			p.stats[i].Done = time.Since(p.started)
			p.mu.Unlock()
			return err
		})
	}
	p.openGrowth(g, gctx, queue, cancel)
	if p.Join > 0 && p.AddConn != nil {
		p.joining.Go(func() {
			if _, err := p.growBy(ctx, p.Join, false); err != nil && !errors.Is(err, ErrGrowClosed) && ctx.Err() == nil {
				p.warn(fmt.Sprintf("opening the job's other streams: %v", err))
			}
		})
	}
	g.Go(func() error {
		defer p.closeGrowth()
		return p.dispatch(gctx, walked, queue)
	})
	err := g.Wait()
	if cause := context.Cause(ctx); cause != nil && p.fatal != nil {
		err = p.fatal
	}
	if err != nil {
		p.closeAll(ctx)
		return err
	}

	if p.draining() {
		p.phase("stopped after the batches in flight")
		return p.closeStreams(ctx, p.upConns(0, len(p.Conns)))
	}
	// Files that changed while read: once more, now that the rest is in.
	if retry := p.takeRetries(); len(retry) > 0 {
		p.phase(fmt.Sprintf("sending %d files again that changed while read", len(retry)))
		in := make(chan *model.Batch, 1)
		in <- &model.Batch{ID: retryID, Entries: retry}
		close(in)
		_, err := p.conn(p.use(0)).Run(ctx, in, func(r Result) {
			if p.record(r) {
				cancel(p.fatal)
			}
		})
		if cause := context.Cause(ctx); cause != nil && p.fatal != nil {
			err = p.fatal
		}
		if err != nil {
			p.closeAll(ctx)
			return err
		}
	}
	p.phase("data sent")
	dirs, symlinks, links, err := def.lists()
	if err != nil {
		p.closeAll(ctx)
		return err
	}
	// Phase 2: hard links, each on the stream whose receiver wrote the target.
	if err := p.hardlinks(ctx, links); err != nil {
		p.closeAll(ctx)
		return err
	}
	p.phase("hard links applied")
	if p.BeforeFinal != nil {
		if err := p.BeforeFinal(ctx, p.Conns); err != nil {
			p.closeAll(ctx)
			return err
		}
	}
	// Phase 3: symlinks, then directories deepest first, on stream 0.
	// Streams 1..K-1 are done: close them while stream 0 works.
	closed := make(chan error, 1)
	first := p.use(0)
	go func() {
		closed <- p.closeStreams(ctx, slices.DeleteFunc(p.upConns(0, len(p.Conns)), func(c Conn) bool { return c == p.conn(first) }))
	}()
	// In groups of finalGroup batches, read back from disk as they go
	// (on a small tree: one group, both lists together).
	var group []model.Entry
	apply := func(es []model.Entry) error {
		group = append(group, es...)
		if len(group) < finalGroup*p.FinalFiles {
			return nil
		}
		err := p.final(ctx, first, group)
		group = nil
		return err
	}
	n := finalGroup * p.FinalFiles
	err = symlinks.Each(n, apply)
	if err == nil {
		err = dirs.Each(n, apply)
	}
	if err == nil && len(group) > 0 {
		err = p.final(ctx, first, group)
	}
	if err == nil {
		p.phase("symlinks and directories applied")
		err = p.closeStreams(ctx, []Conn{p.conn(first)})
	}
	return errors.Join(err, <-closed)
}

// finalGroup is how many final batches go down the pipeline at once: the
// deferred entries are read back from disk a group at a time.
const finalGroup = 16

func (p *Pool) draining() bool {
	select {
	case <-p.Drain:
		return true
	default:
		return false
	}
}

// retryID is the id of the batch of files sent again.
const retryID = 1<<63 - 1

// fromQueue reports whether a batch id is one the dispatcher hands out
// (the walk's, and halves of them), not a final batch or a re-send.
func fromQueue(id uint64) bool { return id < 1<<62 }

// owned is a hard-link target in place at a receiver.
type owned struct {
	stream, epoch int
	entry         model.Entry
}

func (p *Pool) takeRetries() []model.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.retries
	p.retries = nil
	return r
}

func (p *Pool) phase(name string) {
	if p.OnPhase != nil {
		p.OnPhase(name)
	}
}

func depth(p string) int {
	if p == "." {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// record accounts one result; it reports whether the job must stop.
func (p *Pool) record(r Result) (stop bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.stats[r.Stream]
	if r.Ack != nil {
		ctr := p.Counters[r.Stream]
		ctr.RecvBytes.Add(r.Ack.Bytes)
		ctr.RecvFiles.Add(r.Ack.Files)
		ctr.RecvWriteNanos.Add(r.Ack.WriteNanos)
		ctr.RecvFsyncNanos.Add(r.Ack.FsyncNanos)
		if r.Ack.CPUNanos > 0 {
			ctr.RecvCPUNanos.Store(r.Ack.CPUNanos)
		}
		if r.Ack.LatencyNanos > 0 {
			ctr.RecvLatency.Store(r.Ack.LatencyNanos)
		}
		if !r.Final {
			ctr.Batches.Add(1)
		}
	}
	if !r.Final && fromQueue(r.Batch.ID) && r.Ack != nil {
		p.pending--
		p.signal()
	}
	if !r.Final {
		s.Batches++
		s.Files += r.Ack.Files
		s.Bytes += r.Ack.Bytes
		s.Busy = time.Since(p.started)
	}
	bad := map[int]bool{}
	for _, e := range r.Ack.Errors {
		bad[e.Index] = true
		if (e.Code == wire.CodeNoSpace || e.Code == wire.CodeReadOnly) && p.fatal == nil {
			if e.Code == wire.CodeNoSpace {
				p.fatal = fmt.Errorf("%w: %s", ErrNoSpace, e.Msg)
			} else {
				p.fatal = fmt.Errorf("destination is read-only: %s", e.Msg)
			}
		}
	}
	if p.Restat != nil && fromQueue(r.Batch.ID) && r.Ack != nil {
		// Corrupted on the way: not an error yet, it goes again (once).
		var kept []wire.EntryError
		for _, e := range r.Ack.Errors {
			if e.Code == wire.CodeCorrupt {
				if ne, ok := p.Restat(r.Batch.Entries[e.Index]); ok {
					p.retries = append(p.retries, ne)
					r.Again = append(r.Again, e.Index)
					continue
				}
			}
			kept = append(kept, e)
		}
		if len(kept) != len(r.Ack.Errors) {
			a := *r.Ack
			a.Errors = kept
			r.Ack = &a
		}
	}
	if p.Restat != nil && fromQueue(r.Batch.ID) {
		// Changed while read: not an error yet, it goes again.
		r.SrcErrors = slices.DeleteFunc(slices.Clone(r.SrcErrors), func(e source.Error) bool {
			if !errors.Is(e.Err, source.ErrChanged) {
				return false
			}
			ne, ok := p.Restat(r.Batch.Entries[e.Index])
			if ok {
				p.retries = append(p.retries, ne)
				r.Again = append(r.Again, e.Index)
			}
			return ok
		})
	}
	for _, e := range r.SrcErrors {
		bad[e.Index] = true
	}
	for _, i := range r.Again {
		bad[i] = true
	}
	if !r.Final && !p.linking {
		for i := range r.Batch.Entries {
			e := &r.Batch.Entries[i]
			if e.Nlink > 1 && e.Kind == model.KindFile && !bad[i] {
				if err := p.owner.Add(owned{stream: r.Stream, epoch: p.epoch[r.Stream], entry: *e}); err != nil && p.fatal == nil {
					p.fatal = err
				}
			}
		}
	}
	if p.OnResult != nil {
		p.OnResult(r)
	}
	return p.fatal != nil
}

// final applies entries on one stream, in order, in pipelined batches of
// up to FinalFiles; a stream that fails with a retryable error is
// reconnected and the entries applied again (they are idempotent).
func (p *Pool) final(ctx context.Context, stream int, entries []model.Entry) error {
	for attempt := 1; ; attempt++ {
		err := p.finalOnce(ctx, stream, entries)
		if err == nil || p.Redial == nil || !Retryable(err) || attempt > p.Retries || ctx.Err() != nil {
			return err
		}
		p.warn(fmt.Sprintf("stream %d lost: %v; reconnecting", stream, err))
		if _, rerr := p.reconnect(ctx, stream); rerr != nil {
			return fmt.Errorf("%w (and could not reconnect: %v)", err, rerr)
		}
	}
}

func (p *Pool) finalOnce(ctx context.Context, stream int, entries []model.Entry) error {
	var bs []*model.Batch
	p.mu.Lock()
	for chunk := range slices.Chunk(entries, p.FinalFiles) {
		p.nextID++
		bs = append(bs, &model.Batch{ID: p.nextID, Entries: chunk})
	}
	p.mu.Unlock()
	if len(bs) == 0 {
		return nil
	}
	stop := false
	err := p.conn(stream).Final(ctx, bs, func(r Result) {
		r.Stream = stream
		stop = p.record(r) || stop
	})
	if err != nil {
		return err
	}
	if stop {
		return p.fatal
	}
	return nil
}

// hardlinks creates the second names of hard-linked files, each on the
// stream whose receiver wrote (or verified) its target: a join of the
// links, sorted by target, with the targets' owners, sorted by path, read
// back from disk a chunk of links at a time.
func (p *Pool) hardlinks(ctx context.Context, links *spill.List[model.Entry]) error {
	if links.Len() == 0 {
		return nil
	}
	p.mu.Lock()
	p.linking = true
	p.mu.Unlock()
	next, stop := iter.Pull2(p.owner.All())
	defer stop()
	var ahead owned // read from the owners, not yet used
	var have, done bool
	var key string // the last target looked up
	var last owned // its owner
	var found bool // whether it has one
	owner := func(target string) (owned, bool, error) {
		if target == key && key != "" {
			return last, found, nil
		}
		key, found = target, false
		for !done {
			if !have {
				o, err, ok := next()
				if !ok {
					done = true
					break
				}
				if err != nil {
					return owned{}, false, err
				}
				ahead, have = o, true
			}
			if c := strings.Compare(ahead.entry.Path, target); c > 0 {
				break
			} else if c == 0 {
				last, found = ahead, true // the last record of a path wins
			}
			have = false
		}
		return last, found, nil
	}
	return links.Each(hardlinkChunk, func(chunk []model.Entry) error {
		per := make([][]model.Entry, len(p.Conns))
		var orphans []model.Entry
		// Targets written before their stream reconnected may be at another
		// receiver than the one the stream reaches now: that one must see
		// them first (a quick check: no data if they are in place).
		refresh := make([][]model.Entry, len(p.Conns))
		for _, l := range chunk {
			again := l.Link == key
			o, ok, err := owner(l.Link)
			if err != nil {
				return err
			}
			if !ok {
				orphans = append(orphans, l)
				continue
			}
			s := p.use(o.stream) // a stream given up: another (one agent serves them all)
			per[s] = append(per[s], l)
			if (s != o.stream || p.epoch[s] != o.epoch) && !again {
				refresh[s] = append(refresh[s], o.entry)
			}
		}
		if len(orphans) > 0 && p.OnResult != nil {
			// Report links whose target did not arrive as failed entries.
			ack := &wire.BatchAck{}
			for i, l := range orphans {
				ack.Errors = append(ack.Errors, wire.EntryError{Index: i, Code: wire.CodeOther,
					Msg: fmt.Sprintf("hard link %s: its target %s was not transferred", l.Path, l.Link)})
			}
			p.mu.Lock()
			p.OnResult(Result{Batch: &model.Batch{Entries: orphans}, Final: true, Ack: ack})
			p.mu.Unlock()
		}
		g, gctx := errgroup.WithContext(ctx)
		for s, list := range per {
			if len(list) == 0 {
				continue
			}
			g.Go(func() error {
				if len(refresh[s]) > 0 {
					if err := p.resend(gctx, s, refresh[s]); err != nil {
						return err
					}
				}
				return p.final(gctx, s, list)
			})
		}
		return g.Wait()
	})
}

// hardlinkChunk is how many hard links are read back from disk and
// applied at once.
const hardlinkChunk = 1 << 14

// resend offers entries again on stream s as a data batch (the receiver's
// quick check skips those in place and then knows them).
func (p *Pool) resend(ctx context.Context, s int, entries []model.Entry) error {
	p.mu.Lock()
	p.nextID++
	b := &model.Batch{ID: p.nextID, Entries: entries}
	p.mu.Unlock()
	for i := range entries {
		b.Bytes += entries[i].Size
	}
	in := make(chan *model.Batch, 1)
	in <- b
	close(in)
	_, err := p.conn(s).Run(ctx, in, func(r Result) {
		r.Stream = s
		p.record(r)
	})
	return err
}

// closeAll ends every stream, all at once (each waits a round trip for
// its receiver's summary); it returns the first error.
func (p *Pool) closeAll(ctx context.Context) error {
	return p.closeStreams(ctx, p.Conns)
}

// closeStreams ends the given streams, all at once.
func (p *Pool) closeStreams(ctx context.Context, conns []Conn) error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Close(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Tail splitting: once the walk is over, a batch handed out is first halved
// until it holds at most 1/(2K) of the work still queued (guided
// self-scheduling, down to minSplitFiles files), so batches shrink as the
// queue drains and the streams run out of work together instead of one
// finishing a whole batch while the others idle.
const minSplitFiles = 16

// openingBatches is how many batches per stream Pool.Opening bounds: a
// stream takes up to four at once (Client.Run keeps manifests ahead), and
// which of them a stream gets first is not known here.
const openingBatches = 4

// cost is a batch's weight for balancing: bytes plus a per-file overhead.
func cost(b *model.Batch) int64 {
	return b.Bytes + int64(len(b.Entries))*sharder.DefaultFileCost
}

// dispatch feeds the streams from the sharder's output, splitting the tail.
// stream runs stream i's share of phase 1: it takes batches until the
// queue closes. When the connection fails with a retryable error, its
// batches in flight go back to the queue for any stream, and the stream
// reconnects (Redial) with exponential backoff; if it cannot, it stops and
// the job goes on without it, unless it was the last.
func (p *Pool) stream(ctx context.Context, i int, in <-chan *model.Batch, cancel context.CancelCauseFunc) error {
	done := func(r Result) {
		r.Stream = i
		if p.record(r) {
			cancel(p.fatal)
		}
	}
	for {
		unacked, err := p.conn(i).Run(ctx, in, done)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if err := p.giveBack(unacked, err); err != nil {
			return err
		}
		if !Retryable(err) {
			return err
		}
		p.warn(fmt.Sprintf("stream %d lost: %v; its %d batches in flight go to the other streams", i, err, len(unacked)))
		if p.Redial == nil {
			return p.streamDown(i, err)
		}
		c, rerr := p.reconnect(ctx, i)
		if rerr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.warn(fmt.Sprintf("stream %d: could not reconnect within %s: %v; going on without it", i, p.ReconnectTimeout, rerr))
			return p.streamDown(i, err)
		}
		p.warn(fmt.Sprintf("stream %d reconnected (%s)", i, connName(c)))
	}
}

// use returns stream i if it is up, else the first stream that is.
func (p *Pool) use(i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down[i] {
		return i
	}
	for j, d := range p.down {
		if !d {
			return j
		}
	}
	return i
}

// upConns are the streams not given up.
func (p *Pool) upConns(from, to int) []Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cs []Conn
	for i := from; i < to; i++ {
		if !p.down[i] {
			cs = append(cs, p.Conns[i])
		}
	}
	return cs
}

func (p *Pool) conn(i int) Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Conns[i]
}

// giveBack requeues the batches a failed stream had in flight; a batch
// that has now failed Retries times fails the job.
func (p *Pool) giveBack(unacked []*model.Batch, cause error) error {
	var back []*model.Batch
	p.mu.Lock()
	for _, b := range unacked {
		if !fromQueue(b.ID) {
			continue // a re-send (changed files, hard-link targets): not from the queue
		}
		p.attempts[b.ID]++
		if n := p.attempts[b.ID]; n > p.Retries {
			p.mu.Unlock()
			return fmt.Errorf("batch %s (%d files) failed on %d streams, the last time: %w", batchname.Name(b.ID), len(b.Entries), n, cause)
		}
		back = append(back, b)
	}
	p.mu.Unlock()
	// Outside the lock (the dispatcher takes it): requeue first, then
	// count them as no longer handed out, so that the dispatcher never
	// sees nothing pending while they are on their way back.
	for _, b := range back {
		p.requeue <- b // room for every batch in flight: see Run
	}
	p.mu.Lock()
	p.pending -= len(back)
	p.mu.Unlock()
	p.signal()
	return nil
}

// streamDown records that stream i gave up; when no stream is left with
// work outstanding, the job cannot make progress.
func (p *Pool) streamDown(i int, cause error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live--
	p.down[i] = true
	p.signal()
	if p.live == 0 {
		return fmt.Errorf("no stream can make progress (the last, stream %d: %w)", i, cause)
	}
	return nil
}

// attach gives connection c of stream i its counters and the job's limit.
func (p *Pool) attach(i int, c Conn) {
	if cc, ok := c.(Counted); ok {
		cc.SetCounters(p.Counters[i])
	}
	if lc, ok := c.(Limited); ok && p.Limit != nil {
		lc.SetLimit(p.Limit)
	}
}

// reconnect redials stream i with exponential backoff and jitter, for up
// to ReconnectTimeout. Redial gets the job's context: the connection it
// opens lives as long as the job.
func (p *Pool) reconnect(ctx context.Context, i int) (Conn, error) {
	deadline := time.Now().Add(p.ReconnectTimeout)
	delay := 250 * time.Millisecond
	for {
		c, err := p.Redial(p.jobCtx, i)
		if err == nil {
			p.mu.Lock()
			p.Conns[i] = c
			p.epoch[i]++
			p.mu.Unlock()
			p.attach(i, c)
			return c, nil
		}
		if !Retryable(err) {
			return nil, err
		}
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay)/2+1))
		if time.Now().Add(wait).After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the last attempt: %v)", context.Cause(ctx), err)
		case <-time.After(wait):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (p *Pool) warn(msg string) {
	if p.OnWarn != nil {
		p.OnWarn(msg)
	}
}

// signal wakes the dispatcher (p.mu held or not: it never blocks).
func (p *Pool) signal() {
	select {
	case p.settled <- struct{}{}:
	default:
	}
}

func (p *Pool) dispatch(ctx context.Context, in <-chan *model.Batch, out chan<- *model.Batch) error {
	defer close(out)
	var q []*model.Batch
	walkDone, sent := false, false
	opened := 0 // batches handed out under Opening
	for {
		p.mu.Lock()
		pending, live, k := p.pending, p.live, len(p.Conns) // Grow adds to Conns
		p.mu.Unlock()
		// Done when the walk is over and every batch handed out is
		// acknowledged (a failed stream's batches come back), or no stream
		// is left to take what remains.
		if walkDone && len(q) == 0 && len(p.requeue) == 0 && pending == 0 || live == 0 {
			return nil
		}
		var head *model.Batch
		var send chan<- *model.Batch
		if len(q) > 0 {
			if walkDone {
				// Guided self-scheduling: hand out at most 1/(2K) of what is left.
				var left int64
				for _, b := range q {
					left += cost(b)
				}
				for len(q[0].Entries) >= 2*minSplitFiles && cost(q[0]) > left/int64(2*k) {
					a, b := p.split(q[0])
					q = append([]*model.Batch{a, b}, q[1:]...)
				}
			}
			for opened < openingBatches*k && len(q[0].Entries) >= 2 && cost(q[0]) > p.Opening && p.Opening > 0 {
				a, b := p.split(q[0])
				q = append([]*model.Batch{a, b}, q[1:]...)
			}
			head, send = q[0], out
		}
		var recv <-chan *model.Batch
		if !walkDone && len(q) < 2*k {
			recv = in
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Drain:
			return nil
		case b := <-p.requeue:
			q = append([]*model.Batch{b}, q...) // first: it is late already
		case <-p.settled:
		case b, ok := <-recv:
			if !ok {
				walkDone = true
				continue
			}
			q = append(q, b)
		case send <- head:
			q = q[1:]
			opened++
			p.mu.Lock()
			p.pending++
			p.mu.Unlock()
			if !sent {
				sent = true
				p.phase("first batch handed to a stream") // its data leaves now: -v times it
			}
		}
	}
}

// split halves a batch, keeping each half's files contiguous (and so a
// directory's files together).
func (p *Pool) split(b *model.Batch) (*model.Batch, *model.Batch) {
	mid := len(b.Entries) / 2
	p.mu.Lock()
	// Named after the walk's batch it is part of (#17.2, #17.3, ...).
	root := batchname.Root(b.ID)
	if p.parts == nil {
		p.parts = map[uint64]uint64{}
	}
	n := max(p.parts[root], 1) + 1
	p.parts[root] = n
	id, ok := batchname.Part(root, n)
	if !ok {
		p.nextSplit++
		id = p.nextSplit
	}
	p.mu.Unlock()
	first := &model.Batch{ID: b.ID, Entries: b.Entries[:mid:mid]}
	second := &model.Batch{ID: id, Entries: b.Entries[mid:]}
	for i := range first.Entries {
		first.Bytes += first.Entries[i].Size
	}
	second.Bytes = b.Bytes - first.Bytes
	return first, second
}
