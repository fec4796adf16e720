package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// Deferred collects the entries created after all file data: directories
// (metadata applied last), symlinks and hard links. Add is called from the
// sharder's single partitioning goroutine.
type Deferred struct {
	mu        sync.Mutex
	Dirs      []sharder.Entry
	Symlinks  []sharder.Entry
	Hardlinks []sharder.Entry
}

// Add files an entry under its kind.
func (d *Deferred) Add(e sharder.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch e.Kind {
	case sharder.KindDir:
		d.Dirs = append(d.Dirs, e)
	case sharder.KindSymlink:
		d.Symlinks = append(d.Symlinks, e)
	case sharder.KindHardlink:
		d.Hardlinks = append(d.Hardlinks, e)
	}
}

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
	// Counters has one entry per stream; Run allocates them if nil.
	Counters []*Counters
	// Restat, if set, looks a file that changed while it was read up
	// again at the source: the pool sends it once more, after the other
	// files, with what Restat returns (ok false: not again). A file that
	// changes during that second read too is reported (ErrChanged).
	Restat func(e sharder.Entry) (sharder.Entry, bool)

	mu        sync.Mutex
	stats     []StreamStats
	owner     map[string]int // hard-link target -> stream that wrote or verified it
	fatal     error
	nextID    uint64 // ids of final batches
	nextSplit uint64 // ids of the second halves of split batches
	retries   []sharder.Entry
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
func (p *Pool) Run(ctx context.Context, in <-chan *sharder.Batch, def *Deferred) error {
	if len(p.Conns) == 0 {
		return errors.New("no streams")
	}
	if p.FinalFiles <= 0 {
		p.FinalFiles = 2000
	}
	p.stats = make([]StreamStats, len(p.Conns))
	if len(p.Counters) != len(p.Conns) {
		p.Counters = make([]*Counters, len(p.Conns))
		for i := range p.Counters {
			p.Counters[i] = &Counters{}
		}
	}
	for i, c := range p.Conns {
		if cc, ok := c.(Counted); ok {
			cc.SetCounters(p.Counters[i])
		}
		if rc, ok := c.(Receiving); ok {
			if id := rc.ReceiverProcess(); id != "" {
				p.Counters[i].RecvProcess.Store(&id)
			}
		}
	}
	p.owner = map[string]int{}
	p.nextID = 1 << 62
	p.nextSplit = 1 << 61
	p.started = time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Phase 1: file data, every stream pulling from one queue.
	g, gctx := errgroup.WithContext(ctx)
	queue := make(chan *sharder.Batch)
	walked := in
	g.Go(func() error { return p.dispatch(gctx, walked, queue) })
	in = queue
	for i, c := range p.Conns {
		g.Go(func() error {
			p.Counters[i].Active.Store(true)
			defer p.Counters[i].Active.Store(false)
			_, err := c.Run(gctx, in, func(r Result) {
				r.Stream = i
				if p.record(r) {
					cancel(p.fatal)
				}
			})
			p.mu.Lock()
			p.stats[i].Done = time.Since(p.started)
			p.mu.Unlock()
			return err
		})
	}
	err := g.Wait()
	if cause := context.Cause(ctx); cause != nil && p.fatal != nil {
		err = p.fatal
	}
	if err != nil {
		p.closeAll(ctx)
		return err
	}

	// Files that changed while read: once more, now that the rest is in.
	if retry := p.takeRetries(); len(retry) > 0 {
		p.phase(fmt.Sprintf("sending %d files again that changed while read", len(retry)))
		in := make(chan *sharder.Batch, 1)
		in <- &sharder.Batch{ID: retryID, Entries: retry}
		close(in)
		_, err := p.Conns[0].Run(ctx, in, func(r Result) {
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
	// Phase 2: hard links, each on the stream whose receiver wrote the target.
	if err := p.hardlinks(ctx, def.Hardlinks); err != nil {
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
	dirs := slices.Clone(def.Dirs)
	slices.SortFunc(dirs, func(a, b sharder.Entry) int {
		if d := depth(b.Path) - depth(a.Path); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
	// Streams 1..K-1 are done: close them while stream 0 works.
	closed := make(chan error, 1)
	go func() { closed <- p.closeStreams(ctx, p.Conns[1:]) }()
	err = p.final(ctx, 0, slices.Concat(def.Symlinks, dirs))
	if err == nil {
		p.phase("symlinks and directories applied")
		err = p.closeStreams(ctx, p.Conns[:1])
	}
	return errors.Join(err, <-closed)
}

// retryID is the id of the batch of files sent again.
const retryID = 1<<63 - 1

func (p *Pool) takeRetries() []sharder.Entry {
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
		if !r.Final {
			ctr.Batches.Add(1)
		}
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
	if p.Restat != nil && r.Batch.ID != retryID {
		// Changed while read: not an error yet, it goes again.
		r.SrcErrors = slices.DeleteFunc(slices.Clone(r.SrcErrors), func(e SourceError) bool {
			if !errors.Is(e.Err, ErrChanged) {
				return false
			}
			ne, ok := p.Restat(r.Batch.Entries[e.Index])
			if ok {
				p.retries = append(p.retries, ne)
			}
			return ok
		})
	}
	for _, e := range r.SrcErrors {
		bad[e.Index] = true
	}
	if !r.Final {
		for i := range r.Batch.Entries {
			e := &r.Batch.Entries[i]
			if e.Nlink > 1 && e.Kind == sharder.KindFile && !bad[i] {
				p.owner[e.Path] = r.Stream
			}
		}
	}
	if p.OnResult != nil {
		p.OnResult(r)
	}
	return p.fatal != nil
}

// final applies entries on one stream, in order, in pipelined batches of
// up to FinalFiles.
func (p *Pool) final(ctx context.Context, stream int, entries []sharder.Entry) error {
	var bs []*sharder.Batch
	p.mu.Lock()
	for chunk := range slices.Chunk(entries, p.FinalFiles) {
		p.nextID++
		bs = append(bs, &sharder.Batch{ID: p.nextID, Entries: chunk})
	}
	p.mu.Unlock()
	if len(bs) == 0 {
		return nil
	}
	stop := false
	err := p.Conns[stream].Final(ctx, bs, func(r Result) {
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

func (p *Pool) hardlinks(ctx context.Context, links []sharder.Entry) error {
	per := make([][]sharder.Entry, len(p.Conns))
	var orphans []sharder.Entry
	for _, l := range links {
		if s, ok := p.owner[l.Link]; ok {
			per[s] = append(per[s], l)
		} else {
			orphans = append(orphans, l)
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
		p.OnResult(Result{Batch: &sharder.Batch{Entries: orphans}, Final: true, Ack: ack})
		p.mu.Unlock()
	}
	g, gctx := errgroup.WithContext(ctx)
	for s, list := range per {
		if len(list) == 0 {
			continue
		}
		g.Go(func() error { return p.final(gctx, s, list) })
	}
	return g.Wait()
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

// cost is a batch's weight for balancing: bytes plus a per-file overhead.
func cost(b *sharder.Batch) int64 {
	return b.Bytes + int64(len(b.Entries))*sharder.DefaultFileCost
}

// dispatch feeds the streams from the sharder's output, splitting the tail.
func (p *Pool) dispatch(ctx context.Context, in <-chan *sharder.Batch, out chan<- *sharder.Batch) error {
	defer close(out)
	var q []*sharder.Batch
	walkDone := false
	for {
		if walkDone && len(q) == 0 {
			return nil
		}
		var head *sharder.Batch
		var send chan<- *sharder.Batch
		if len(q) > 0 {
			if walkDone {
				// Guided self-scheduling: hand out at most 1/(2K) of what is left.
				var left int64
				for _, b := range q {
					left += cost(b)
				}
				for len(q[0].Entries) >= 2*minSplitFiles && cost(q[0]) > left/int64(2*len(p.Conns)) {
					a, b := p.split(q[0])
					q = append([]*sharder.Batch{a, b}, q[1:]...)
				}
			}
			head, send = q[0], out
		}
		var recv <-chan *sharder.Batch
		if !walkDone && len(q) < 2*len(p.Conns) {
			recv = in
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-recv:
			if !ok {
				walkDone = true
				continue
			}
			q = append(q, b)
		case send <- head:
			q = q[1:]
		}
	}
}

// split halves a batch, keeping each half's files contiguous (and so a
// directory's files together).
func (p *Pool) split(b *sharder.Batch) (*sharder.Batch, *sharder.Batch) {
	mid := len(b.Entries) / 2
	p.mu.Lock()
	p.nextSplit++
	id := p.nextSplit
	p.mu.Unlock()
	first := &sharder.Batch{ID: b.ID, Entries: b.Entries[:mid:mid]}
	second := &sharder.Batch{ID: id, Entries: b.Entries[mid:]}
	for i := range first.Entries {
		first.Bytes += first.Entries[i].Size
	}
	second.Bytes = b.Bytes - first.Bytes
	return first, second
}
