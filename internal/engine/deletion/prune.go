package deletion

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// pruneChunk is about how many names go in one prune request.
const pruneChunk = 4096

// errOverCeiling: the pass removed more than pruneMode.ceiling.
var errOverCeiling = errors.New("more removed than the --delete guard allows")

// pruneMode is what a prune pass asks of the receivers.
type pruneMode struct {
	dryRun bool // list what would go, remove nothing
	count  bool // count what would go, remove and list nothing
	// candidates: with count, the results list each entry of a listed
	// directory that would go (wire.PruneRequest.Candidates).
	candidates bool
	// limit, if set (above 0), is the most entries the pass removes: it
	// must then run on one connection, whose requests each carry what is
	// left (--max-delete).
	limit int64
	// ceiling, if above 0, stops the pass once its results have said
	// more were removed (errOverCeiling): no more requests go, and those
	// under way stop at their next result (a receiver learns it when its
	// connection closes).
	ceiling int64
}

// pruneTally is what a prune pass found.
type pruneTally struct {
	selected int64 // names the listing of SRC held
	examined int64 // entries of DEST looked at (not protected ones)
	count    int64 // removed (in a dry run or a count: that would be)
	held     int64 // that would have gone but for the limit
}

// would is how many entries the pass removes, limit or not.
func (t pruneTally) would() int64 { return t.count + t.held }

// Extras has the receivers list what DEST has beyond src, and removes
// nothing: each result goes to report (its Removed entries are the
// extras, its Errors what could not be looked at).
func Extras(ctx context.Context, conns []send.Conn, src Source, report func(*wire.PruneResult)) error {
	_, err := prunePass(ctx, conns, src, pruneMode{dryRun: true}, report)
	return err
}

// prunePass lists src one directory at a time and has the receivers prune
// (or, in a dry run, list; or count) what DEST has beyond it, K
// directories at once; report gets every result.
func prunePass(ctx context.Context, conns []send.Conn, src Source, m pruneMode, report func(*wire.PruneResult)) (pruneTally, error) {
	rules := src.Rules.List()
	var selected int64
	t, err := runPass(ctx, conns, m, report, func(q *pruneQueue) error {
		var cur *wire.PruneRequest
		var big chan *wire.PruneRequest // the parts of the directory being listed
		var id uint64
		n := 0
		flush := func() error {
			r := cur
			cur, n = nil, 0
			return q.one(r)
		}
		request := func() *wire.PruneRequest {
			id++
			return &wire.PruneRequest{ID: id, DryRun: m.dryRun, CountOnly: m.count, Candidates: m.count && m.candidates, DeleteExcluded: src.DeleteExcluded, Rules: rules}
		}
		err := sharder.ListDirs(q.ctx, src.Root, src.Rules, src.Links, func(dir string, names []string, more bool) error {
			selected += int64(len(names))
			if !src.Shard.OwnsDir(dir) {
				return nil // --shard: another part's directory
			}
			if big == nil && more {
				// A large directory: its parts go one after the
				// other on one connection, as they are listed.
				if err := flush(); err != nil {
					return err
				}
				big = make(chan *wire.PruneRequest, 1)
				if err := q.seq(big); err != nil {
					return err
				}
			}
			if big != nil {
				r := request()
				r.More = more
				r.Dirs = []wire.PruneDir{{Dir: dir, Names: names}}
				select {
				case big <- r:
				case <-q.ctx.Done():
					return q.ctx.Err()
				}
				if !more {
					close(big)
					big = nil
				}
				return nil
			}
			if cur != nil && n+len(names) > pruneChunk {
				if err := flush(); err != nil {
					return err
				}
			}
			if cur == nil {
				cur = request()
			}
			cur.Dirs = append(cur.Dirs, wire.PruneDir{Dir: dir, Names: names})
			n += len(names) + 1
			return nil
		})
		if err != nil {
			// big stays open: the cancellation ends its connection's
			// sequence, not a request that looks like its last.
			return fmt.Errorf("delete: reading %s again: %w (nothing more deleted)", src.Name, err)
		}
		return flush()
	})
	t.selected = selected
	return t, err
}

// exactPass has the receivers remove the candidates a count kept, and
// only those (wire.PruneRequest.Exact), K requests at once: a directory's
// candidates go in requests of about pruneChunk names, and neither SRC
// nor a directory of DEST is listed.
func exactPass(ctx context.Context, conns []send.Conn, src Source, cands *candidates, m pruneMode, report func(*wire.PruneResult)) (pruneTally, error) {
	rules := src.Rules.List()
	return runPass(ctx, conns, m, report, func(q *pruneQueue) error {
		var cur *wire.PruneRequest
		var id uint64
		n := 0
		flush := func() error {
			r := cur
			cur, n = nil, 0
			return q.one(r)
		}
		for c, err := range cands.All() {
			if err != nil {
				return fmt.Errorf("delete: reading back what would go: %w (nothing more deleted)", err)
			}
			if cur != nil && n >= pruneChunk {
				if err := flush(); err != nil {
					return err
				}
			}
			if cur == nil {
				id++
				cur = &wire.PruneRequest{ID: id, Exact: true, DeleteExcluded: src.DeleteExcluded, Rules: rules}
			}
			if k := len(cur.Dirs); k == 0 || cur.Dirs[k-1].Dir != c.dir {
				cur.Dirs = append(cur.Dirs, wire.PruneDir{Dir: c.dir})
				n++
			}
			d := &cur.Dirs[len(cur.Dirs)-1]
			d.Names = append(d.Names, c.name)
			d.Kinds = append(d.Kinds, c.kind)
			n++
		}
		return flush()
	})
}

// pruneQueue is where a pass puts its requests: sequences of them, each
// carried by one connection in turn (small directories packed into one
// request, or one large directory in parts).
type pruneQueue struct {
	ctx  context.Context
	reqs chan<- (<-chan *wire.PruneRequest)
}

// seq queues the sequence ch.
func (q *pruneQueue) seq(ch <-chan *wire.PruneRequest) error {
	select {
	case q.reqs <- ch:
		return nil
	case <-q.ctx.Done():
		return q.ctx.Err()
	}
}

// one queues r (if any) as a sequence of its own.
func (q *pruneQueue) one(r *wire.PruneRequest) error {
	if r == nil {
		return nil
	}
	ch := make(chan *wire.PruneRequest, 1)
	ch <- r
	close(ch)
	return q.seq(ch)
}

// runPass runs a prune pass: produce queues its requests while the
// receivers carry them out (runPrune), K at once, or on one connection
// that counts down m.limit. Past m.ceiling removed it stops, with
// errOverCeiling.
func runPass(ctx context.Context, conns []send.Conn, m pruneMode, report func(*wire.PruneResult), produce func(*pruneQueue) error) (pruneTally, error) {
	var t pruneTally
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if m.limit > 0 {
		conns = []send.Conn{&budgeted{Conn: conns[0], left: m.limit}}
	}
	reqs := make(chan (<-chan *wire.PruneRequest), len(conns))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(reqs)
		return produce(&pruneQueue{ctx: gctx, reqs: reqs})
	})
	g.Go(func() error { return runPrune(gctx, stop, conns, reqs, m, &t, report) })
	err := g.Wait()
	if errors.Is(context.Cause(ctx), errOverCeiling) {
		err = errOverCeiling
	}
	return t, err
}

// runPrune has the receivers carry out the requests of reqs (as
// send.RunPrune), adds their results to t and hands them to report; past
// m.ceiling removed, it stops the pass (stop(errOverCeiling)).
func runPrune(ctx context.Context, stop context.CancelCauseFunc, conns []send.Conn, reqs <-chan (<-chan *wire.PruneRequest), m pruneMode, t *pruneTally, report func(*wire.PruneResult)) error {
	return send.RunPrune(ctx, conns, reqs, func(r *wire.PruneResult) {
		t.examined += int64(r.Examined)
		t.count += int64(r.Count)
		t.held += int64(r.Held)
		report(r)
		if m.ceiling > 0 && t.count > m.ceiling {
			stop(errOverCeiling)
		}
	})
}

// candidate is an entry of DEST that a count found to go: a name of the
// directory dir, of the kind listed.
type candidate struct {
	dir, name string
	kind      wire.EntryKind
}

// candidates is what a count found to go, sorted by directory then name,
// held in memory up to a bound and on disk past it (spill), so that a
// pass that deletes millions does not grow with them.
type candidates = spill.List[candidate]

func newCandidates() *candidates {
	return spill.New("", 0, func(a, b *candidate) int {
		if c := strings.Compare(a.dir, b.dir); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	}, candidateCodec{})
}

// candidateCodec stores a candidate as its kind, its directory, a NUL
// (which no path holds) and its name.
type candidateCodec struct{}

func (candidateCodec) Append(b []byte, c *candidate) []byte {
	b = append(append(b, c.kind), c.dir...)
	return append(append(b, 0), c.name...)
}

func (candidateCodec) Decode(b []byte) (candidate, error) {
	i := bytes.IndexByte(b, 0)
	if len(b) < 1 || i < 1 {
		return candidate{}, errors.New("a candidate for deletion read back damaged")
	}
	return candidate{kind: b[0], dir: string(b[1:i]), name: string(b[i+1:])}, nil
}

// budgeted is a connection whose prune requests share a limit of entries
// removed (--max-delete): each carries what is left of it, and once it is
// spent they only count what they would remove (as held). Its requests
// must go one at a time.
type budgeted struct {
	send.Conn
	left int64
}

// Prune implements send.Pruner.
func (b *budgeted) Prune(ctx context.Context, req *wire.PruneRequest, done func(*wire.PruneResult)) error {
	pr, ok := b.Conn.(send.Pruner)
	if !ok {
		return fmt.Errorf("this transport cannot delete")
	}
	spent := b.left <= 0
	if spent {
		req.CountOnly = true
	} else {
		req.Limit = uint64(b.left)
	}
	return pr.Prune(ctx, req, func(r *wire.PruneResult) {
		if spent {
			r.Held += r.Count
			r.Count = 0
		} else {
			b.left -= int64(r.Count)
		}
		done(r)
	})
}
