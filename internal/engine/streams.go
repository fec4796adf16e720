package engine

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/engine/resume"
	"github.com/bulkmove/bulkmove/internal/itemize"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
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
			j.logFailedMsg(r.Batch.Entries[e.Index].Path, e.Msg)
		}
	}
	for _, e := range r.SrcErrors {
		j.failed++
		if errors.Is(e.Err, source.ErrChanged) {
			j.changed++
		}
		termsafe.Errorf(j.stderr, "%v", e.Err)
		j.ev.problem("error", r.Batch.Entries[e.Index].Path, e.Err.Error())
		j.logFailed(r.Batch.Entries[e.Index].Path, e.Err)
	}
	if j.ev != nil {
		j.ev.progress(j.m, false)
	}
	if r.Ack != nil {
		j.countList(r)
		j.itemize(r)
	}
	if j.rm != nil {
		j.rm.done(r)
	}
	if r.Ack != nil && r.Ack.BackedUp > 0 {
		j.noteBackups(r.Ack)
	}
	if len(r.Deltas) > 0 && r.Ack != nil {
		j.deltas(r)
	}
	if j.flags.Verbose && !r.Final && r.Ack != nil {
		termsafe.Errorf(j.stderr, "batch %s on stream %d: %d files, %s", batchname.Name(r.Batch.ID), r.Stream, r.Ack.Files, units.Size(r.Ack.Bytes))
	}
}

// deltas counts what r's files sent as a block delta saved, those that
// landed, and with -v says so of each.
func (j *job) deltas(r send.Result) {
	bad := r.Failed()
	for _, d := range r.Deltas {
		if bad[d.Index] {
			continue
		}
		j.saved += d.Size - d.Sent
		if e := &r.Batch.Entries[d.Index]; j.flags.Verbose && e.IsRange() {
			termsafe.Errorf(j.stderr, "delta: %s %s at %s, %s sent", e.Path, units.Size(d.Size), units.Size(e.Off), units.Size(d.Sent))
		} else if j.flags.Verbose {
			termsafe.Errorf(j.stderr, "delta: %s %s, %s sent", e.Path, units.Size(d.Size), units.Size(d.Sent))
		}
	}
}

// itemize reports what the receiver found changed of each entry of r's
// batch (its items, with -i, --log-file-format or --stats): counted for
// --stats, a line on stdout (-i, --out-format) and in the log
// (--log-file-format), or with --json an item event. Under j.mu.
func (j *job) itemize(r send.Result) {
	pushed := j.remote != nil || j.serveAddr != ""
	var failed map[int]bool
	if len(r.Ack.Errors) > 0 || len(r.SrcErrors) > 0 || len(r.Again) > 0 {
		failed = r.Failed()
	}
	for _, it := range r.Ack.Items {
		if it.Index >= len(r.Batch.Entries) || failed[it.Index] {
			// Not in place at DEST: its line is its failure's, as
			// rsync's (or it goes again, and is itemized then).
			continue
		}
		e := &r.Batch.Entries[it.Index]
		code := itemize.Code(e.Kind, it.Flags, pushed)
		if code == "" {
			continue
		}
		if it.Flags&wire.ItemNew != 0 {
			j.countCreated(e)
		}
		rec := &itemize.Record{Entry: e, Code: code, Op: "send"}
		if j.pulling {
			rec.Op = "recv"
		}
		if it.Flags&wire.ItemSent != 0 {
			rec.Sent = e.DataLen()
		}
		j.showItem(rec)
	}
}

// showItem writes an item's line: on stdout as -i's format says, or an
// item event with --json; in --log-file's log as its format says.
func (j *job) showItem(rec *itemize.Record) {
	if j.out == nil && j.logFmt == nil {
		return
	}
	rec.Time = time.Now()
	e := rec.Entry
	switch {
	case rec.Code == itemize.Deleted || j.pulling:
		rec.Full = strings.TrimSuffix(j.dst, "/") + "/" + e.Path
	case j.srcFile:
		rec.Full = j.src
	default:
		rec.Full = strings.TrimSuffix(j.src, "/") + "/" + e.Path
	}
	switch {
	case j.out == nil:
	case j.ev != nil:
		link := ""
		if e.Kind == model.KindSymlink || e.Kind == model.KindHardlink {
			link = e.Link
		}
		j.ev.item(e.Path, rec.Code, link)
	case j.out.Shows(rec):
		// Line escaped the names in it already (termsafe.Escape): as it is,
		// not escaped twice.
		io.WriteString(j.stdout, j.out.Line(rec)+"\n")
	}
	if j.logFmt != nil {
		j.logItem(rec)
		if j.logFmt.Shows(rec) {
			io.WriteString(j.log, j.logFmt.Line(rec)+"\n")
		}
	}
}

// itemizeDeleted reports an entry --delete removed (name as
// deletion.PrunedName gives it: a directory with its slash) as showItem
// does.
func (j *job) itemizeDeleted(name string) {
	e := &model.Entry{Path: name, Kind: model.KindFile}
	if p, ok := strings.CutSuffix(name, "/"); ok {
		e.Path, e.Kind = p, model.KindDir
	}
	j.showItem(&itemize.Record{Entry: e, Code: itemize.Deleted, Op: "del."})
}
