package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/journal"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
)

// resume is the job's journal of acknowledged batches (see package
// journal): what an earlier, interrupted run of the same job had in place
// is not recorded again, and is not sent again where the receiver's check
// finds it still in place; the journal alone never leaves a file out.
type resume struct {
	j *journal.Journal
	// bound is closed once the journal is bound to DEST (bindJournal): named
	// waits for it, since what the journal says of another DEST is not
	// to be trusted.
	bound     chan struct{}
	bindOnce  sync.Once
	untrusted bool // no binding could be made: named says no
	isBound   bool // named has seen bound closed (named runs on the relay's goroutine only)
	wg        sync.WaitGroup
	mu        sync.Mutex
	err       error // the first append failure
}

// openJournal opens the job's journal: --journal PATH, none for no
// journal, or by default one under the user's state directory keyed by
// SRC, DEST and the options that change what moves.
func (j *job) openJournal() (*resume, error) {
	p := j.flags.Journal
	if p == "none" || j.hub != nil {
		return nil, nil
	}
	if p == "" {
		dst := j.dst
		if j.remote == nil {
			if abs, err := filepath.Abs(dst); err == nil {
				dst = abs
			}
		}
		ro := j.receiveOptions()
		var err error
		key := append([]string{"check=" + ro.Check, fmt.Sprintf("setid=%v", ro.KeepSetid),
			"rules=" + strings.Join(j.flags.Rules.List(), "\x00")}, j.flags.Scale.journalKey()...)
		if !ro.Owner {
			key = append(key, "owner=false")
		}
		p, err = journal.DefaultPath(j.src, dst, key...)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if n, err := EnvCount("BULKMOVE_JOURNAL_MEM", "files"); err != nil {
		return nil, err
	} else if n > 0 {
		journal.MemEntries = n
	}
	jr, err := journal.Open(p)
	if err != nil {
		if j.flags.Journal != "" || errors.Is(err, journal.ErrLocked) {
			return nil, err
		}
		// No place for the default journal: the job still runs, and a
		// rerun still skips what is in place (by the quick check).
		termsafe.Errorf(j.stderr, "warning: %v; going on without a resume journal", err)
		return nil, nil
	}
	return &resume{j: jr, bound: make(chan struct{})}, nil
}

// bindJournal binds the journal to DEST, named by id (destSays), before named
// answers anything: records of another DEST (this one deleted and made
// anew, or another filesystem there) are dropped, with a warning, and
// those files go again unless the quick check finds them in place.
func (j *job) bindJournal(id string) error {
	r := j.res
	if r == nil {
		return nil
	}
	defer r.bindOnce.Do(func() { close(r.bound) })
	dropped, err := r.j.Destination(id)
	if err != nil {
		r.untrusted = true
		return err
	}
	if dropped > 0 {
		termsafe.Errorf(j.stderr, "warning: the journal %s held %d files acknowledged by another %s (deleted and made anew, or another filesystem there since): they go again unless the quick check finds them in place",
			r.j.Path(), dropped, j.dst)
	}
	if b, f := r.j.Loaded(); f > 0 {
		j.trace("resuming: the journal %s holds %d files in %d batches from an earlier run", r.j.Path(), f, b)
	}
	return nil
}

// unbind lets named answer without a binding (the streams did not
// connect): it then says no to everything.
func (r *resume) unbind() {
	if r == nil {
		return
	}
	r.bindOnce.Do(func() {
		r.untrusted = true
		close(r.bound)
	})
}

// EnvCount reads a count from the environment variable name: 0 if it is
// not set, an error naming what it counts if it is not a positive number.
func EnvCount(name, what string) (int64, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a number of %s, at least 1", name, v, what)
	}
	return n, nil
}

// dir is the journal's directory, where the lists that outgrow memory
// go; "" (TMPDIR) without a journal.
func (r *resume) dir() string {
	if r == nil {
		return ""
	}
	return filepath.Dir(r.j.Path())
}

// named reports whether the journal says an earlier run had e in place.
// It decides nothing on its own: e is offered to the receiver like any
// other entry, and is left out only if the receiver's check finds it in
// place (a file deleted, truncated or touched at DEST since goes again).
// The relay marks such entries (Entry.Resumed): record does not append
// them once more, their bytes are not counted as still to move, and the
// summary counts those that DEST confirmed. Files with
// several links are never named: their later names are linked to
// whichever copy this run has. Nor are the ranges of a split file: the
// receiver keeps the record of those that landed with the file's partial
// (receive/extract/partial.go).
func (r *resume) named(e *model.Entry) bool {
	if r == nil || e.Kind != model.KindFile || e.Nlink > 1 || e.IsRange() {
		return false
	}
	if !r.isBound {
		<-r.bound // once, not a channel operation a file
		r.isBound = true
	}
	if r.untrusted {
		return false
	}
	return r.j.Done(e.Path, e.Size, e.MTime, uint32(e.Mode))
}

// confirmed counts the entries of an acknowledged batch that the journal
// named (Resumed): in place, those the receiver found as sent; resent,
// those it asked for again (deleted or changed at DEST since).
func confirmed(res send.Result) (inPlace, resent int64) {
	if res.Final || res.Ack == nil {
		return 0, 0
	}
	for i := range res.Batch.Entries {
		if !res.Batch.Entries[i].Resumed {
			continue
		}
		if res.Need == nil || res.Need[i] {
			resent++
		} else {
			inPlace++
		}
	}
	return inPlace, resent
}

// record appends the entries of an acknowledged batch that are in place,
// in the background (appends are fsynced; concurrent ones share a sync).
func (r *resume) record(res send.Result) {
	if r == nil || res.Final || res.Ack == nil {
		return
	}
	bad := map[int]bool{}
	for _, e := range res.Ack.Errors {
		bad[e.Index] = true
	}
	for _, e := range res.SrcErrors {
		bad[e.Index] = true
	}
	for _, i := range res.Again {
		bad[i] = true // not in place yet: it goes once more
	}
	var es []journal.Entry
	for i := range res.Batch.Entries {
		e := &res.Batch.Entries[i]
		if e.Kind == model.KindFile && !bad[i] && !e.IsRange() && !e.Resumed {
			es = append(es, journal.Entry{Path: e.Path, Size: e.Size, MTime: e.MTime, Mode: uint32(e.Mode)})
		}
	}
	if len(es) == 0 {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.j.Append(es); err != nil {
			r.mu.Lock()
			if r.err == nil {
				r.err = err
			}
			r.mu.Unlock()
		}
	}()
}

// close waits for the appends, then removes the journal if the job is
// complete or keeps it for the next run to resume from.
func (r *resume) close(complete bool) error {
	if r == nil {
		return nil
	}
	r.wg.Wait()
	if complete && r.err == nil {
		return r.j.Finish()
	}
	cerr := r.j.Close()
	if r.err != nil {
		return fmt.Errorf("%w (the next run may send some files again)", r.err)
	}
	return cerr
}
