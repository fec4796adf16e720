package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/engine/resume"
	"github.com/bulkmove/bulkmove/internal/itemize"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
)

// relay forwards batches to the pool, counting what the walk plans and
// renaming the single entry of a one-file job.
func (j *job) relay(ctx context.Context, out chan *model.Batch, rename string) chan<- *model.Batch {
	in := make(chan *model.Batch)
	go func() {
		defer close(out)
		for b := range in {
			if rename != "" {
				for i := range b.Entries {
					b.Entries[i].Path = rename
				}
			}
			for i := range b.Entries {
				if e := &b.Entries[i]; j.res.Named(e) {
					// Most likely in place still: not counted against
					// DEST's free space, nor as still to move.
					e.Resumed = true
				}
			}
			w := planned(b)
			total := j.m.PlannedBytes.Add(w.bytes)
			j.m.PlannedFiles.Add(w.files)
			if err := j.checkSpace(total); err != nil {
				j.stopWalk(err)
				return
			}
			select {
			case out <- b:
			case <-ctx.Done():
			}
		}
	}()
	return in
}

func (j *job) onResult(r send.Result) {
	j.res.Record(r)
	resumed, resent := resume.Confirmed(r)
	j.mu.Lock()
	defer j.mu.Unlock()
	if r.Ack != nil {
		if r.Final {
			j.links += r.Ack.Files
		} else {
			j.files += r.Ack.Files
			j.m.DoneFiles.Add(r.Ack.Files)
			j.ev.settle(r.Batch)
		}
		j.m.DoneBytes.Add(r.Ack.Bytes)
		j.m.Skipped.Add(r.Ack.Skipped)
		j.m.Failed.Add(int64(len(r.Ack.Errors) + len(r.SrcErrors)))
		j.bytes += r.Ack.Bytes
		j.skipped += r.Ack.Skipped
		j.resumed += resumed
		j.resent += resent
		for _, e := range r.Ack.Errors {
			j.failed++
			termsafe.Errorf(j.stderr, "%s: %s", j.dst, e.Msg)
			j.ev.problem("error", r.Batch.Entries[e.Index].Path, e.Msg)
		}
	}
	for _, e := range r.SrcErrors {
		j.failed++
		if errors.Is(e.Err, source.ErrChanged) {
			j.changed++
		}
		termsafe.Errorf(j.stderr, "%v", e.Err)
		j.ev.problem("error", r.Batch.Entries[e.Index].Path, e.Err.Error())
	}
	if j.ev != nil {
		j.ev.progress(j.m, false)
	}
	if j.flags.Itemize && r.Ack != nil {
		j.itemize(r)
	}
	if j.flags.Verbose && !r.Final && r.Ack != nil {
		termsafe.Errorf(j.stderr, "batch %s on stream %d: %d files, %s", batchname.Name(r.Batch.ID), r.Stream, r.Ack.Files, units.Size(r.Ack.Bytes))
	}
}

// itemize reports, for -i, what the receiver found changed of each entry
// of r's batch: a line on stdout as rsync's, or with --json an item event.
func (j *job) itemize(r send.Result) {
	pushed := j.remote != nil || j.serveAddr != ""
	for _, it := range r.Ack.Items {
		if it.Index >= len(r.Batch.Entries) {
			continue
		}
		e := &r.Batch.Entries[it.Index]
		code := itemize.Code(e.Kind, it.Flags, pushed)
		switch {
		case code == "":
		case j.ev != nil:
			link := ""
			if e.Kind == model.KindSymlink || e.Kind == model.KindHardlink {
				link = e.Link
			}
			j.ev.item(e.Path, code, link)
		default:
			termsafe.Printf(j.stdout, "%s %s\n", code, itemize.Name(e))
		}
	}
}

// itemizeDeleted reports, for -i, an entry --delete removed (name as
// deletion.PrunedName gives it: a directory with its slash).
func (j *job) itemizeDeleted(name string) {
	if j.ev != nil {
		j.ev.item(strings.TrimSuffix(name, "/"), itemize.Deleted, "")
		return
	}
	termsafe.Printf(j.stdout, "%s\n", itemize.Deleting(name))
}
