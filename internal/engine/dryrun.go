package engine

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/sharder"
)

// dryRun walks and partitions SRC, prints each file that would move and the
// batch plan: how many batches, their sizes, and how evenly K streams
// pulling from one queue would share them. With --json, stdout takes
// events only: a start, a progress event with what the walk found, and
// the end (endIfNone), and no listing.
func (j *job) dryRun(ctx context.Context, p plan, opt sharder.Options) Outcome {
	j.ev.start(j)
	list := j.listing()
	// -i: the move's lines in place of the listing; --log-file: those
	// lines in the log, the listing on stdout as without it.
	var items *dryItems
	walkCtx := ctx
	if j.flags.Itemize || j.logFmt != nil {
		var err error
		if items, err = j.dryItemize(ctx, p); err != nil {
			return j.fail(Failed, err)
		}
		defer items.close()
		walkCtx = items.ctx
	}
	var others int64
	opt.Deferred = func(e model.Entry) {
		others++
		j.countLink(&e)
		if !j.flags.Itemize && e.Path != "." {
			termsafe.Printf(list, "%s %s\n", e.Kind, e.Path)
		}
		if items != nil {
			if p.rename != "" {
				e.Path = p.rename
			}
			items.deferred(e)
		}
	}
	out := make(chan *model.Batch, 16)
	// Only each batch's size and count are kept: 16 bytes a batch, not
	// an entry a file.
	type planned struct {
		bytes int64
		files int
	}
	var batches []planned
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range out {
			for i := range b.Entries {
				if p.rename != "" {
					b.Entries[i].Path = p.rename
				}
				if !j.flags.Itemize {
					termsafe.Printf(list, "file %s\n", filepath.ToSlash(b.Entries[i].Path))
				}
			}
			batches = append(batches, planned{bytes: b.Bytes, files: len(b.Entries)})
			if items != nil {
				items.batch(b)
			}
		}
	}()
	st, err := sharder.Run(walkCtx, p.walkRoot, opt, out)
	<-done
	j.walked.Store(&st)
	if items != nil {
		if ierr := items.wait(); ierr != nil {
			return j.fail(Failed, ierr)
		}
	}
	if err != nil {
		return j.fail(Failed, fmt.Errorf("walk %s: %w", j.src, err))
	}
	var largest *planned
	var total int64
	for i := range batches {
		b := &batches[i]
		total += b.bytes
		if largest == nil || b.bytes > largest.bytes {
			largest = b
		}
	}
	// Simulate K streams taking batches in order, each to the least loaded.
	cost := func(b planned) int64 { return b.bytes + int64(b.files)*sharder.DefaultFileCost }
	load := make([]int64, j.flags.Jobs)
	for _, b := range batches {
		i := slices.Index(load, slices.Min(load))
		load[i] += cost(b)
	}
	var sum int64
	for _, l := range load {
		sum += l
	}
	imbalance := 0.0
	if sum > 0 {
		mean := float64(sum) / float64(len(load))
		imbalance = (float64(slices.Max(load))/mean - 1) * 100
	}
	j.ev.planned(st.Files, total, time.Since(j.start))
	termsafe.Errorf(j.stderr, "dry run: would move %d files (%s) in %d batches, plus %d directories and links", st.Files, units.Size(total), len(batches), others)
	if largest != nil {
		termsafe.Errorf(j.stderr, "dry run: largest batch %d files, %s; imbalance across %d streams %.1f%%", largest.files, units.Size(largest.bytes), j.flags.Jobs, imbalance)
	}
	if j.flags.RemoveSourceFiles {
		termsafe.Errorf(j.stderr, "dry run: --remove-source-files would remove from SRC each file and link listed, once it landed at DEST (removing nothing now)")
	}
	if st.Errors > 0 {
		if j.flags.Delete {
			termsafe.Errorf(j.stderr, "dry run: --delete would delete nothing: the walk had errors")
		}
		return Partial
	}
	if j.flags.Delete && p.rename == "" {
		if items != nil {
			conns := items.conns
			items.conns = nil // DryRun closes them
			return j.dryRunDeleteOver(ctx, p, conns)
		}
		return j.dryRunDelete(ctx, p)
	}
	return Done
}

// listing is where a dry run lists what it would do: stdout, but with
// --json, whose stdout takes events only.
func (j *job) listing() io.Writer {
	if j.ev != nil {
		return io.Discard
	}
	return j.stdout
}
