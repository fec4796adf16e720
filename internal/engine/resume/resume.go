// Package resume is a job's journal of acknowledged batches, as the
// engine keeps it while the job runs: what an earlier, interrupted run of
// the same job had in place is not recorded again, and is not sent again
// where the receiver's check finds it still in place; the journal alone
// never leaves a file out.
//
// The file format, its lock and where the default journal lives are
// package journal's; this package is the job's use of it: opening it (or
// going on without one), binding it to DEST before it answers anything,
// naming the entries the walk finds (Named), recording acknowledged
// batches in the background (Record) and, at the end, removing a complete
// job's journal or keeping it for the next run (Close).
//
// It sits below internal/engine, which computes the journal's path and
// calls it from the walk's relay and the pool's results. It must not
// import internal/engine. All its methods take a nil *Journal (no
// journal) and then do nothing.
package resume

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/journal"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
)

// Journal is the job's resume journal.
type Journal struct {
	j *journal.Journal
	// bound is closed once the journal is bound to DEST (Bind): Named
	// waits for it, since what the journal says of another DEST is not
	// to be trusted.
	bound     chan struct{}
	bindOnce  sync.Once
	untrusted bool // no binding could be made: Named says no
	isBound   bool // Named has seen bound closed (Named runs on the relay's goroutine only)
	wg        sync.WaitGroup
	mu        sync.Mutex
	err       error // the first append failure
}

// Open opens the journal at path. explicit says the user named it
// (--journal PATH): then a journal that cannot be opened is an error.
// The default journal that cannot be opened is a warning on stderr, and
// Open returns nil: the job still runs, and a rerun still skips what is
// in place (by the quick check). A journal locked by another run is an
// error either way.
func Open(path string, explicit bool, stderr io.Writer) (*Journal, error) {
	jr, err := journal.Open(path)
	if err != nil {
		if explicit || errors.Is(err, journal.ErrLocked) {
			return nil, err
		}
		termsafe.Errorf(stderr, "warning: %v; going on without a resume journal", err)
		return nil, nil
	}
	return &Journal{j: jr, bound: make(chan struct{})}, nil
}

// Bind binds the journal to DEST, named by id (what the receivers said of
// it), before Named answers anything: records of another DEST (this one
// deleted and made anew, or another filesystem there) are dropped, with a
// warning on stderr naming dst, and those files go again unless the quick
// check finds them in place. trace gets the -v line of what the journal
// holds.
func (r *Journal) Bind(id, dst string, stderr io.Writer, trace func(format string, args ...any)) error {
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
		termsafe.Errorf(stderr, "warning: the journal %s held %d files acknowledged by another %s (deleted and made anew, or another filesystem there since): they go again unless the quick check finds them in place",
			r.j.Path(), dropped, dst)
	}
	if b, f := r.j.Loaded(); f > 0 {
		trace("resuming: the journal %s holds %d files in %d batches from an earlier run", r.j.Path(), f, b)
	}
	return nil
}

// Unbind lets Named answer without a binding (the streams did not
// connect): it then says no to everything.
func (r *Journal) Unbind() {
	if r == nil {
		return
	}
	r.bindOnce.Do(func() {
		r.untrusted = true
		close(r.bound)
	})
}

// Dir is the journal's directory, where the lists that outgrow memory
// go; "" (TMPDIR) without a journal.
func (r *Journal) Dir() string {
	if r == nil {
		return ""
	}
	return filepath.Dir(r.j.Path())
}

// Named reports whether the journal says an earlier run had e in place.
// It decides nothing on its own: e is offered to the receiver like any
// other entry, and is left out only if the receiver's check finds it in
// place (a file deleted, truncated or touched at DEST since goes again).
// The relay marks such entries (Entry.Resumed): Record does not append
// them once more, their bytes are not counted as still to move, and the
// summary counts those that DEST confirmed. Files with
// several links are never named: their later names are linked to
// whichever copy this run has. Nor are the ranges of a split file: the
// receiver keeps the record of those that landed with the file's partial
// (receive/extract/partial.go).
func (r *Journal) Named(e *model.Entry) bool {
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

// Confirmed counts the entries of an acknowledged batch that the journal
// named (Resumed): in place, those the receiver found as sent; resent,
// those it asked for again (deleted or changed at DEST since).
func Confirmed(res send.Result) (inPlace, resent int64) {
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

// Record appends the entries of an acknowledged batch that are in place,
// in the background (appends are fsynced; concurrent ones share a sync).
func (r *Journal) Record(res send.Result) {
	if r == nil || res.Final || res.Ack == nil {
		return
	}
	bad := res.Failed() // (Again: not in place yet, it goes once more)
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

// Close waits for the appends, then removes the journal if the job is
// complete or keeps it for the next run to resume from.
func (r *Journal) Close(complete bool) error {
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
