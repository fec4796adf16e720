package verify

import (
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/engine/deletion"
	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// Status is how a verify run (or a summary) ended.
type Status int

const (
	Same        Status = iota // SRC and DEST agree
	Differ                    // a difference, or an entry SRC could not read; each was reported
	Failed                    // the comparison could not be made or completed
	Interrupted               // ctx ended first
)

// Options is what a verify run compares, and where it reports.
type Options struct {
	Src, Dst string // as named, for messages and the --json report
	// Walk is how to walk SRC (batch sizes, filters, --one-file-system,
	// a single file's name, --shard, --files-from); Run sets its
	// Deferred, OnError and OnWarn.
	Walk     sharder.Options
	WalkRoot string // the directory walked
	// Rename is the name at DEST of a single-file SRC installed under
	// another name ("" otherwise): each entry is compared under it.
	Rename string
	// Extras is the SRC whose listing finds what DEST has beyond it; nil
	// leaves that out (a renamed file, or --files-from: a list does not
	// say what else a directory may hold).
	Extras  *deletion.Source
	Content bool          // compare content too, not only metadata
	Shard   sharder.Shard // --shard i/N, named in the --json report
	// Stdout takes the differences (without --json); Stderr messages for
	// people.
	Stdout, Stderr io.Writer
	// Events takes the differences and the end event instead, with
	// --json; nil without.
	Events *event.Writer
	// ExitCode is the exit code of a status, for the --json report; nil:
	// the status's value.
	ExitCode func(Status) int
}

// tally is a run's findings.
type tally struct {
	mu                      sync.Mutex
	compared                int64
	differ, missing, extras int64
	errs                    int64 // entries of SRC (or DEST's directories) that could not be read
}

// Run compares SRC with DEST over conns, each of which must be a
// send.Verifier, and closes them once done; it reports each difference
// and the totals.
func Run(ctx context.Context, conns []send.Conn, opt Options) Status {
	for _, c := range conns {
		if _, ok := c.(send.Verifier); !ok {
			termsafe.Errorf(opt.Stderr, "verify: this transport cannot verify")
			return Failed
		}
	}
	v := &tally{}
	// Directories, symlinks and hard links, compared once the files are:
	// on disk beyond what memory holds.
	deferred := spill.New[model.Entry]("", 0, nil, model.EntryCodec{})
	defer deferred.Close()
	var dmu sync.Mutex
	wo := opt.Walk
	wo.Deferred = func(e model.Entry) {
		dmu.Lock()
		deferred.Add(e)
		dmu.Unlock()
	}
	wo.OnError = func(path string, err error) {
		v.mu.Lock()
		v.errs++
		v.mu.Unlock()
		termsafe.Errorf(opt.Stderr, "%v", err)
		opt.Events.Problem("error", path, err.Error())
	}
	wo.OnWarn = func(string, string) {}
	walked := make(chan *model.Batch, 2*len(conns))
	batches := make(chan *model.Batch, 2*len(conns))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := sharder.Run(gctx, opt.WalkRoot, wo, walked)
		if err != nil {
			return fmt.Errorf("walk %s: %w", opt.Src, err)
		}
		return nil
	})
	g.Go(func() error {
		defer close(batches)
		var last uint64
		for b := range walked {
			if opt.Rename != "" {
				for i := range b.Entries {
					b.Entries[i].Path = opt.Rename
				}
			}
			last = max(last, b.ID)
			select {
			case batches <- b:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		// The walk is over: directories, symlinks and hard links too.
		return deferred.Each(max(wo.BatchFiles, 1), func(chunk []model.Entry) error {
			last++
			select {
			case batches <- &model.Batch{ID: last, Entries: chunk}:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	for _, c := range conns {
		g.Go(func() error {
			return c.(send.Verifier).Verify(gctx, batches, opt.Content, func(r send.Result) { v.onVerified(&opt, r) })
		})
	}
	err := g.Wait()
	if err == nil && opt.Extras != nil {
		// What DEST has beyond SRC.
		err = deletion.Extras(ctx, conns, *opt.Extras, func(r *wire.PruneResult) { v.onExtras(&opt, r) })
	}
	for _, c := range conns {
		c.Close(ctx)
	}
	st := Same
	switch {
	case ctx.Err() != nil:
		termsafe.Errorf(opt.Stderr, "verify: interrupted after comparing %d entries", v.compared)
		st = Interrupted
	case err != nil:
		termsafe.Errorf(opt.Stderr, "verify: %v", err)
		st = Failed
	default:
		what := "content and metadata"
		if !opt.Content {
			what = "metadata"
		}
		termsafe.Errorf(opt.Stderr, "verify: %d entries compared by %s: %d differ, %d missing, %d extra", v.compared, what, v.differ, v.missing, v.extras)
		if v.errs > 0 || v.differ+v.missing+v.extras > 0 {
			st = Differ
		}
	}
	// --json: the counts, for bulkmove verify-summary to merge the shards'.
	code := int(st)
	if opt.ExitCode != nil {
		code = opt.ExitCode(st)
	}
	ev := &event.VerifyEvent{Src: opt.Src, Dst: opt.Dst, Compared: v.compared, Differ: v.differ, Missing: v.missing,
		Extra: v.extras, Errors: v.errs, Content: opt.Content, ExitCode: code}
	if !opt.Shard.All() {
		ev.Shard = opt.Shard.String()
	}
	if err != nil {
		ev.Error = err.Error()
	}
	opt.Events.Emit("verify", &ev.Head, ev)
	return st
}

func (v *tally) onVerified(opt *Options, r send.Result) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.compared += int64(len(r.Batch.Entries))
	for _, e := range r.Ack.Errors {
		path := r.Batch.Entries[e.Index].Path
		if e.Msg == "missing" {
			v.missing++
		} else {
			v.differ++
		}
		switch {
		case opt.Events != nil:
		case e.Msg == "missing":
			termsafe.Printf(opt.Stdout, "missing %s\n", path)
		default:
			termsafe.Printf(opt.Stdout, "differ %s: %s\n", path, e.Msg)
		}
		opt.Events.Problem("difference", path, e.Msg)
	}
}

func (v *tally) onExtras(opt *Options, r *wire.PruneResult) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range r.Removed {
		v.extras++
		if opt.Events == nil {
			termsafe.Printf(opt.Stdout, "extra %s\n", deletion.PrunedName(e))
		}
		opt.Events.Problem("difference", e.Path, "extra")
	}
	for _, e := range r.Errors {
		termsafe.Errorf(opt.Stderr, "verify: %s", e)
		v.errs++
	}
}
