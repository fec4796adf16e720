package deletion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// Source is the SRC a pass lists: DEST keeps the names it holds.
type Source struct {
	Name           string        // SRC as named, for messages
	Root           string        // the directory listed (SRC, or its parent for a single file)
	Rules          *filter.Rules // the filters: what they exclude stays at DEST, unless DeleteExcluded
	DeleteExcluded bool          // --delete-excluded
	Shard          sharder.Shard // --shard i/N: only the directories this part owns
	Links          sharder.Links // -L, --copy-unsafe-links: a symlink to a directory is listed as the directory
}

// Options is one job's --delete.
type Options struct {
	Source
	Dst       string // DEST as named, for messages
	NoGuard   bool   // --no-delete-guard
	MaxDelete int64  // --max-delete N; below 0 without a limit
	Verbose   bool   // -v: name each entry deleted
	// BackedUp, if set, is told each entry the receiver moved aside
	// rather than deleted (--backup: wire.PrunedEntry.Backup), by its
	// path, before its deletion is.
	BackedUp func(path string)
	// Deleted, if set, is told each entry deleted (-i), or in a dry run
	// each that would be, in place of its listing, by its name as
	// PrunedName gives it.
	Deleted func(name string)
	// Stdout takes the listing of a dry run; Stderr messages for people.
	Stdout, Stderr io.Writer
	// Trace reports a phase, with -v; nil: not at all.
	Trace func(format string, a ...any)
	// Failures is how many errors the job has had so far: with any,
	// nothing is deleted. Nil: none.
	Failures func() int64
	// AddErrors counts n entries of DEST that could not be removed among
	// the job's errors. Nil: not counted beyond Stats.
	AddErrors func(n int64)
	// Failed, if set, is told each receiver's message of an entry it
	// could not remove (--log-file's line for it).
	Failed func(msg string)
}

// Stats is what a --delete did, for the job's summary and exit code.
type Stats struct {
	Deleted int64 // entries removed (or, in a dry run, that would be)
	Dirs    int64 // of them, directories
	Held    int64 // entries --max-delete kept from going
	Errors  int64 // entries that could not be removed
	Skipped bool  // nothing deleted: the job had errors
	Refused bool  // nothing deleted: the guard refused
}

// Deleter is one job's --delete: its options and what it did.
type Deleter struct {
	opt Options
	mu  sync.Mutex // guards st
	st  Stats
}

// New returns the --delete of a job.
func New(opt Options) *Deleter {
	if opt.Trace == nil {
		opt.Trace = func(string, ...any) {}
	}
	return &Deleter{opt: opt}
}

// Stats is what d did so far; a nil d did nothing.
func (d *Deleter) Stats() Stats {
	if d == nil {
		return Stats{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st
}

// Pass is the --delete pass, for send.Pool.BeforeFinal: run after the
// file data and hard links and before directory metadata. It lists SRC
// again, one directory at a time and a large one in parts of about
// sharder.ListChunk names (the receiver gathers a directory's parts, and
// past extract.PruneMem names spills them to disk, so memory does not
// grow with the directory), and the receivers remove from each DEST
// directory what the source directory does not hold, K directories at
// once. Nothing is deleted if anything failed so far: a source file that
// could not be read must not cost its copy (rsync: "IO error encountered
// -- skipping file deletion").
//
// Unless --no-delete-guard, that pass only counts, at the receivers, what
// would go, and nothing is deleted if the walk selected nothing or if
// more than half of at least guardMin entries would go (guardSays):
// the mistakes that empty a DEST (an unmounted SRC, a mistyped path or
// filter). The count keeps the entries it found to go (candidates, on
// disk past a bound), and the deleting pass removes those alone
// (exactPass), each looked at again in its directory's descriptor: SRC
// and DEST are listed once, guard or not, and the guard adds what the
// deletions cost. With --max-delete (which counts too), the deleting
// pass runs on one connection, each request carrying what is left of the
// limit.
func (d *Deleter) Pass(ctx context.Context, conns []send.Conn) error {
	if d.opt.Failures != nil {
		if bad := d.opt.Failures(); bad > 0 {
			termsafe.Errorf(d.opt.Stderr, "not deleting anything at %s: %d errors during the transfer", d.opt.Dst, bad)
			d.mu.Lock()
			d.st.Skipped = true
			d.mu.Unlock()
			return nil
		}
	}
	limited := d.opt.MaxDelete >= 0
	if d.opt.NoGuard && !limited {
		d.opt.Trace("deleting what SRC does not have")
		_, err := prunePass(ctx, conns, d.opt.Source, pruneMode{}, func(r *wire.PruneResult) { d.onPruned(r, false) })
		return err
	}
	// The count keeps what would go (the candidates), and the
	// deleting pass removes those alone: SRC and DEST are listed
	// once, and the second pass costs what it deletes.
	d.opt.Trace("counting what --delete would remove")
	cands := newCandidates()
	defer cands.Close()
	var errs []string
	t, err := prunePass(ctx, conns, d.opt.Source, pruneMode{count: true, candidates: true}, func(r *wire.PruneResult) {
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
	d.onPruned(&wire.PruneResult{Errors: errs}, false)
	if t.would() == 0 {
		return nil
	}
	if why := d.guardSays(t); why != "" {
		termsafe.Errorf(d.opt.Stderr, "--delete refused: %s; nothing was deleted. "+guardHow, why)
		d.mu.Lock()
		d.st.Refused = true // the job then exits 3
		d.mu.Unlock()
		return nil
	}
	if limited && t.would() <= d.opt.MaxDelete {
		limited = false // all of it fits in the limit
	}
	if limited && d.opt.MaxDelete == 0 {
		d.onPruned(&wire.PruneResult{Held: uint64(t.would())}, false)
		d.maxDeleteSays(false)
		return nil
	}
	var m pruneMode
	if limited {
		m.limit = d.opt.MaxDelete
	}
	if !d.opt.NoGuard && t.examined >= guardMin {
		// What was counted is at most half: more than half
		// going now means DEST changed since (a directory to
		// remove filled up).
		m.ceiling = t.examined / 2
	}
	d.opt.Trace("deleting what SRC does not have")
	if _, err := exactPass(ctx, conns, d.opt.Source, cands, m, func(r *wire.PruneResult) { d.onPruned(r, false) }); err != nil {
		if errors.Is(err, errOverCeiling) {
			return fmt.Errorf("--delete stopped after %d deletions: more than half of the %d entries counted at %s before it began, of which %d were to go; DEST changed meanwhile. %s",
				d.Stats().Deleted, t.examined, d.opt.Dst, t.would(), guardHow)
		}
		return err
	}
	d.maxDeleteSays(false)
	return nil
}

// DryRun lists on Stdout what --delete would remove, for --dry-run, and
// closes conns once the receivers have answered. What the guard and
// --max-delete would say it says too; an error is a failure or the
// guard's refusal, and Stats().Held what --max-delete would hold back.
func (d *Deleter) DryRun(ctx context.Context, conns []send.Conn) error {
	m := pruneMode{dryRun: true}
	if d.opt.MaxDelete >= 0 {
		m.limit = d.opt.MaxDelete
		if m.limit == 0 {
			m.dryRun, m.count = false, true // list nothing: all of it is held
		}
	}
	t, err := prunePass(ctx, conns, d.opt.Source, m, func(r *wire.PruneResult) {
		if m.count {
			r.Held, r.Count = r.Count, 0
		}
		d.onPruned(r, true)
	})
	for _, c := range conns {
		c.Close(ctx)
	}
	if err != nil {
		return err
	}
	if m.count {
		t.held, t.count = t.count, 0
	}
	termsafe.Errorf(d.opt.Stderr, "dry run: would delete %d entries", d.Stats().Deleted)
	if why := d.guardSays(t); why != "" {
		return fmt.Errorf("dry run: --delete would refuse: %s; nothing would be deleted. %s", why, guardHow)
	}
	d.maxDeleteSays(true)
	return nil
}

// guardMin is how many entries DEST must hold (of those a --delete pass
// examines) before the guard refuses a pass that would remove more than
// half of them: in a small tree, most of it going is ordinary.
const guardMin = 1000

// guardHow is how to go on when the --delete guard refuses.
const guardHow = "Check SRC (an unmounted filesystem? a mistyped path?) and the filters; to delete all the same, add --no-delete-guard"

// guardSays is why the --delete guard refuses a pass of these counts, or
// "" if it does not (or --no-delete-guard).
func (d *Deleter) guardSays(t pruneTally) string {
	if d.opt.NoGuard || t.would() == 0 {
		return ""
	}
	if t.selected == 0 {
		return fmt.Sprintf("SRC %s selected nothing (it is empty, or the filters exclude everything), and %s at %s would go", d.opt.Name, entries(t.would()), d.opt.Dst)
	}
	if t.examined >= guardMin && 2*t.would() > t.examined {
		return fmt.Sprintf("it would remove %d of the %d entries it examined at %s, more than half", t.would(), t.examined, d.opt.Dst)
	}
	return ""
}

// maxDeleteSays reports that --max-delete held entries back, if it did.
func (d *Deleter) maxDeleteSays(dryRun bool) {
	st := d.Stats()
	if st.Held == 0 {
		return
	}
	verb := "stopped after %d deletions"
	if dryRun {
		verb = "dry run: would stop after %d deletions"
	}
	termsafe.Errorf(d.opt.Stderr, "--max-delete %d: "+verb+"; %d more not deleted", d.opt.MaxDelete, st.Deleted, st.Held)
}

// onPruned counts and reports a result of the receivers: in a dry run,
// each entry that would go is listed on Stdout; with -v, each one
// deleted on Stderr.
func (d *Deleter) onPruned(r *wire.PruneResult, dryRun bool) {
	d.mu.Lock()
	for _, e := range r.Removed {
		d.st.Deleted++
		if e.IsDir {
			d.st.Dirs++
		}
		name := PrunedName(e)
		if e.Backup && d.opt.BackedUp != nil {
			d.opt.BackedUp(e.Path)
		}
		switch {
		case d.opt.Deleted != nil:
			d.opt.Deleted(name) // -i, in a dry run too: the line a move prints
		case dryRun:
			termsafe.Printf(d.opt.Stdout, "delete %s\n", name)
		case d.opt.Verbose:
			termsafe.Errorf(d.opt.Stderr, "deleted %s", name)
		}
	}
	for _, e := range r.Errors {
		termsafe.Errorf(d.opt.Stderr, "%s: %s", d.opt.Dst, e)
		if d.opt.Failed != nil {
			d.opt.Failed(e)
		}
	}
	d.st.Errors += int64(len(r.Errors))
	d.st.Held += int64(r.Held)
	d.mu.Unlock()
	// Outside d.mu: the job takes its own lock, under which it may read
	// Stats.
	if len(r.Errors) > 0 && d.opt.AddErrors != nil {
		d.opt.AddErrors(int64(len(r.Errors)))
	}
}

// PrunedName is how a removed (or extra) entry is listed: directories
// with a trailing '/'.
func PrunedName(e wire.PrunedEntry) string {
	if e.IsDir {
		return e.Path + "/"
	}
	return e.Path
}

// entries says n entries, "1 entry" for one.
func entries(n int64) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
