package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// pruneChunk is about how many names go in one prune request.
const pruneChunk = 4096

// deletePass returns the --delete pass, run by the pool after the file
// data and hard links and before directory metadata. It lists SRC again,
// one directory at a time and a large one in parts of about
// sharder.ListChunk names (the receiver gathers a directory's parts, and
// past extract.PruneMem names spills them to disk, so memory does not grow
// with the directory), and the receivers remove from each DEST directory what the
// source directory does not hold, K directories at once. Nothing is
// deleted if anything failed so far: a source file that could not be read
// must not cost its copy (rsync: "IO error encountered -- skipping file
// deletion").
//
// Unless --no-delete-guard, that pass only counts, at the receivers, what
// would go, and nothing is deleted if the walk selected nothing or if
// more than half of at least deleteGuardMin entries would go (guardSays):
// the mistakes that empty a DEST (an unmounted SRC, a mistyped path or
// filter). The count keeps the entries it found to go (candidates, on
// disk past a bound), and the deleting pass removes those alone
// (exactPass), each looked at again in its directory's descriptor: SRC
// and DEST are listed once, guard or not, and the guard adds what the
// deletions cost. With --max-delete (which counts too), the deleting
// pass runs on one connection, each request carrying what is left of the
// limit.
func (j *job) deletePass(p plan) func(context.Context, []send.Conn) error {
	return func(ctx context.Context, conns []send.Conn) error {
		j.mu.Lock()
		bad := j.failed + j.walkErrs
		j.mu.Unlock()
		if bad > 0 {
			termsafe.Errorf(j.stderr, "not deleting anything at %s: %d errors during the transfer", j.dst, bad)
			j.mu.Lock()
			j.deleteSkipped = true
			j.mu.Unlock()
			return nil
		}
		md := j.flags.MaxDelete
		limited := md.set
		if j.flags.NoDeleteGuard && !limited {
			j.trace("deleting what SRC does not have")
			_, err := j.prunePass(ctx, conns, p, pruneMode{}, func(r *wire.PruneResult) { j.onPruned(r, false) })
			return err
		}
		// The count keeps what would go (the candidates), and the
		// deleting pass removes those alone: SRC and DEST are listed
		// once, and the second pass costs what it deletes.
		j.trace("counting what --delete would remove")
		cands := newCandidates()
		defer cands.Close()
		var errs []string
		t, err := j.prunePass(ctx, conns, p, pruneMode{count: true, candidates: true}, func(r *wire.PruneResult) {
			errs = append(errs, r.Errors...)
			for _, e := range r.Removed {
				cands.Add(candidate{dir: path.Dir(e.Path), name: path.Base(e.Path), kind: e.Kind})
			}
		})
		if err != nil {
			return err
		}
		if err := cands.Err(); err != nil {
			return fmt.Errorf("delete: keeping what would go: %w (nothing deleted)", err)
		}
		// The count's errors are the deleting pass's: it goes only
		// where the count could look.
		j.onPruned(&wire.PruneResult{Errors: errs}, false)
		if t.would() == 0 {
			return nil
		}
		if why := j.guardSays(t); why != "" {
			j.refuseDelete("%s", why)
			return nil
		}
		if limited && t.would() <= md.n {
			limited = false // all of it fits in the limit
		}
		if limited && md.n == 0 {
			j.onPruned(&wire.PruneResult{Held: uint64(t.would())}, false)
			j.maxDeleteSays(false)
			return nil
		}
		var m pruneMode
		if limited {
			m.limit = md.n
		}
		if !j.flags.NoDeleteGuard && t.examined >= deleteGuardMin {
			// What was counted is at most half: more than half
			// going now means DEST changed since (a directory to
			// remove filled up).
			m.ceiling = t.examined / 2
		}
		j.trace("deleting what SRC does not have")
		if _, err := j.exactPass(ctx, conns, cands, m, func(r *wire.PruneResult) { j.onPruned(r, false) }); err != nil {
			if errors.Is(err, errOverCeiling) {
				j.mu.Lock()
				n := j.deleted
				j.mu.Unlock()
				return fmt.Errorf("--delete stopped after %d deletions: more than half of the %d entries counted at %s before it began, of which %d were to go; DEST changed meanwhile. %s",
					n, t.examined, j.dst, t.would(), guardHow)
			}
			return err
		}
		j.maxDeleteSays(false)
		return nil
	}
}

// deleteGuardMin is how many entries DEST must hold (of those a --delete
// pass examines) before the guard refuses a pass that would remove more
// than half of them: in a small tree, most of it going is ordinary.
const deleteGuardMin = 1000

// guardHow is how to go on when the --delete guard refuses.
const guardHow = "Check SRC (an unmounted filesystem? a mistyped path?) and the filters; to delete all the same, add --no-delete-guard"

// refuseDelete says why the --delete guard deleted nothing; the job then
// exits 3.
func (j *job) refuseDelete(format string, a ...any) {
	termsafe.Errorf(j.stderr, "--delete refused: "+format+"; nothing was deleted. "+guardHow, a...)
	j.mu.Lock()
	j.deleteRefused = true
	j.mu.Unlock()
}

// guardSays is why the --delete guard refuses a pass of these counts, or
// "" if it does not (or --no-delete-guard).
func (j *job) guardSays(t pruneTally) string {
	if j.flags.NoDeleteGuard || t.would() == 0 {
		return ""
	}
	if t.selected == 0 {
		return fmt.Sprintf("SRC %s selected nothing (it is empty, or the filters exclude everything), and %s at %s would go", j.src, entries(t.would()), j.dst)
	}
	if t.examined >= deleteGuardMin && 2*t.would() > t.examined {
		return fmt.Sprintf("it would remove %d of the %d entries it examined at %s, more than half", t.would(), t.examined, j.dst)
	}
	return ""
}

// maxDeleteSays reports that --max-delete held entries back, if it did.
func (j *job) maxDeleteSays(dryRun bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.deleteHeld == 0 {
		return
	}
	verb := "stopped after %d deletions"
	if dryRun {
		verb = "dry run: would stop after %d deletions"
	}
	termsafe.Errorf(j.stderr, "--max-delete %d: "+verb+"; %d more not deleted", j.flags.MaxDelete.n, j.deleted, j.deleteHeld)
}

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

// prunePass lists SRC one directory at a time and has the receivers prune
// (or, in a dry run, list; or count) what DEST has beyond it, K
// directories at once; report gets every result.
func (j *job) prunePass(ctx context.Context, conns []send.Conn, p plan, m pruneMode, report func(*wire.PruneResult)) (pruneTally, error) {
	rules := j.flags.Rules.List()
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
			return &wire.PruneRequest{ID: id, DryRun: m.dryRun, CountOnly: m.count, Candidates: m.count && m.candidates, DeleteExcluded: j.flags.DeleteExcluded, Rules: rules}
		}
		err := sharder.ListDirs(q.ctx, p.walkRoot, j.flags.Rules, func(dir string, names []string, more bool) error {
			selected += int64(len(names))
			if !j.flags.Scale.Shard.OwnsDir(dir) {
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
			return fmt.Errorf("delete: reading %s again: %w (nothing more deleted)", j.src, err)
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
func (j *job) exactPass(ctx context.Context, conns []send.Conn, cands *candidates, m pruneMode, report func(*wire.PruneResult)) (pruneTally, error) {
	rules := j.flags.Rules.List()
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
				cur = &wire.PruneRequest{ID: id, Exact: true, DeleteExcluded: j.flags.DeleteExcluded, Rules: rules}
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

// prunedName is how a removed (or extra) entry is listed: directories
// with a trailing '/'.
func prunedName(e wire.PrunedEntry) string {
	if e.IsDir {
		return e.Path + "/"
	}
	return e.Path
}

func (j *job) onPruned(r *wire.PruneResult, dryRun bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range r.Removed {
		j.deleted++
		name := prunedName(e)
		switch {
		case dryRun:
			termsafe.Printf(j.stdout, "delete %s\n", name)
		case j.flags.Verbose:
			termsafe.Errorf(j.stderr, "deleted %s", name)
		}
	}
	for _, e := range r.Errors {
		j.failed++
		termsafe.Errorf(j.stderr, "%s: %s", j.dst, e)
	}
	j.deleteHeld += int64(r.Held)
}

// dryRunDelete lists what --delete would remove, for --dry-run: it
// connects to the receiver but moves nothing. What the --delete guard
// and --max-delete would say it says too, and exits as the real pass
// would.
func (j *job) dryRunDelete(ctx context.Context, p plan) Outcome {
	if j.remote == nil && j.hub == nil {
		if _, err := os.Stat(p.dstRoot); err != nil {
			return Done // no DEST yet: nothing to delete
		}
	}
	conns, cleanup, err := j.connect(ctx, p)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	defer cleanup()
	m := pruneMode{dryRun: true}
	if j.flags.MaxDelete.set {
		m.limit = j.flags.MaxDelete.n
		if m.limit == 0 {
			m.dryRun, m.count = false, true // list nothing: all of it is held
		}
	}
	t, err := j.prunePass(ctx, conns, p, m, func(r *wire.PruneResult) {
		if m.count {
			r.Held, r.Count = r.Count, 0
		}
		j.onPruned(r, true)
	})
	for _, c := range conns {
		c.Close(ctx)
	}
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	if m.count {
		t.held, t.count = t.count, 0
	}
	termsafe.Errorf(j.stderr, "dry run: would delete %d entries", j.deleted)
	if why := j.guardSays(t); why != "" {
		termsafe.Errorf(j.stderr, "dry run: --delete would refuse: %s; nothing would be deleted. %s", why, guardHow)
		return Failed
	}
	j.maxDeleteSays(true)
	if j.deleteHeld > 0 {
		return MaxDeleteHeld
	}
	return Done
}

// entries says n entries, "1 entry" for one.
func entries(n int64) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
