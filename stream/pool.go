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
	Busy    time.Duration // time from its first batch taken to its last acknowledged
	Done    time.Duration // when it finished its last file batch, since the start
}

// Pool runs a job over K streams.
type Pool struct {
	Conns      []Conn
	FinalFiles int          // entries per final batch (default 2000)
	OnResult   func(Result) // called for every acknowledged batch, serialised

	mu      sync.Mutex
	stats   []StreamStats
	owner   map[string]int // hard-link target -> stream that wrote or verified it
	fatal   error
	nextID  uint64
	started time.Time
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
	p.owner = map[string]int{}
	p.nextID = 1 << 62
	p.started = time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Phase 1: file data, every stream pulling from one queue.
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range p.Conns {
		g.Go(func() error {
			first := time.Time{}
			_, err := c.Run(gctx, in, func(r Result) {
				if first.IsZero() {
					first = time.Now()
				}
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

	// Phase 2: hard links, each on the stream whose receiver wrote the target.
	if err := p.hardlinks(ctx, def.Hardlinks); err != nil {
		p.closeAll(ctx)
		return err
	}
	// Phase 3: symlinks, then directories deepest first, on stream 0.
	dirs := slices.Clone(def.Dirs)
	slices.SortFunc(dirs, func(a, b sharder.Entry) int {
		if d := depth(b.Path) - depth(a.Path); d != 0 {
			return d
		}
		return strings.Compare(a.Path, b.Path)
	})
	for _, list := range [][]sharder.Entry{def.Symlinks, dirs} {
		for chunk := range slices.Chunk(list, p.FinalFiles) {
			if err := p.final(ctx, 0, chunk); err != nil {
				p.closeAll(ctx)
				return err
			}
		}
	}
	return p.closeAll(ctx)
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

func (p *Pool) final(ctx context.Context, stream int, entries []sharder.Entry) error {
	p.mu.Lock()
	p.nextID++
	b := &sharder.Batch{ID: p.nextID, Entries: entries}
	p.mu.Unlock()
	r, err := p.Conns[stream].Final(ctx, b)
	if err != nil {
		return err
	}
	r.Stream = stream
	if p.record(r) {
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
		g.Go(func() error {
			for chunk := range slices.Chunk(list, p.FinalFiles) {
				if err := p.final(gctx, s, chunk); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// closeAll ends every stream; it returns the first error.
func (p *Pool) closeAll(ctx context.Context) error {
	var first error
	for _, c := range p.Conns {
		if _, err := c.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
