package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// Verify compares SRC with DEST (j.Config.Check must have passed; a
// local SRC), content too unless content is false, and lists each
// difference on j.Stdout. Partial: a difference.
func (j Job) Verify(ctx context.Context, content bool) Outcome {
	jb := j.newJob(j.Stderr)
	if j.Config.JSON {
		jb.ev = newEvents(j.Stdout)
	}
	if _, remote, _ := sshx.ParseTarget(jb.src); remote {
		termsafe.Errorf(j.Stderr, "verify: SRC must be local (run bulkmove verify on the source host)")
		return UsageError
	}
	p, code := jb.resolve(ctx)
	if code != Done {
		return code
	}
	return jb.verify(ctx, p, content)
}

// verifier collects a verify run's findings.
type verifier struct {
	mu                      sync.Mutex
	compared                int64
	differ, missing, extras int64
}

func (j *job) verify(ctx context.Context, p plan, content bool) Outcome {
	if j.remote == nil {
		if fi, err := os.Stat(p.dstRoot); err != nil || !fi.IsDir() {
			termsafe.Errorf(j.stderr, "verify: destination %s: %v", j.dst, orNotDir(err))
			return Failed
		}
	}
	conns, cleanup, err := j.connect(ctx, p)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	defer cleanup()
	for _, c := range conns {
		if _, ok := c.(send.Verifier); !ok {
			termsafe.Errorf(j.stderr, "verify: this transport cannot verify")
			return Failed
		}
	}
	var v verifier
	// Directories, symlinks and hard links, compared once the files are:
	// on disk beyond what memory holds.
	deferred := spill.New[model.Entry]("", 0, nil, model.EntryCodec{})
	defer deferred.Close()
	var dmu sync.Mutex
	opt := sharder.Options{
		BatchBytes:    int64(j.flags.BatchSize),
		BatchFiles:    j.flags.BatchFiles,
		Filter:        j.flags.Rules,
		OneFileSystem: j.flags.OneFS,
		Deferred: func(e model.Entry) {
			dmu.Lock()
			deferred.Add(e)
			dmu.Unlock()
		},
		OnError: func(path string, err error) {
			j.mu.Lock()
			j.walkErrs++
			j.mu.Unlock()
			termsafe.Errorf(j.stderr, "%v", err)
			j.ev.problem("error", path, err.Error())
		},
		OnWarn: func(string, string) {},
	}
	if p.src.File != "" {
		opt.Name = filepath.Base(j.src) // a symlink's name, if SRC is one
	}
	// --shard i/N and --files-from: the part this process moved.
	closeList, err := j.flags.Scale.apply(&opt, j.stdin)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return UsageError
	}
	defer closeList()
	walked := make(chan *model.Batch, 2*len(conns))
	batches := make(chan *model.Batch, 2*len(conns))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := sharder.Run(gctx, p.walkRoot, opt, walked)
		if err != nil {
			return fmt.Errorf("walk %s: %w", j.src, err)
		}
		return nil
	})
	g.Go(func() error {
		defer close(batches)
		var last uint64
		for b := range walked {
			if p.rename != "" {
				for i := range b.Entries {
					b.Entries[i].Path = p.rename
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
		return deferred.Each(max(j.flags.BatchFiles, 1), func(chunk []model.Entry) error {
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
			return c.(send.Verifier).Verify(gctx, batches, content, func(r send.Result) { j.onVerified(&v, r) })
		})
	}
	err = g.Wait()
	if err == nil && p.rename == "" && j.flags.Scale.FilesFrom == "" {
		// What DEST has beyond SRC (a list does not say what else a
		// directory may hold: not with --files-from).
		_, err = j.prunePass(ctx, conns, p, pruneMode{dryRun: true}, func(r *wire.PruneResult) { j.onExtras(&v, r) })
	}
	for _, c := range conns {
		c.Close(ctx)
	}
	code := Done
	switch {
	case ctx.Err() != nil:
		termsafe.Errorf(j.stderr, "verify: interrupted after comparing %d entries", v.compared)
		code = Interrupted
	case err != nil:
		termsafe.Errorf(j.stderr, "verify: %v", err)
		code = Failed
	default:
		what := "content and metadata"
		if !content {
			what = "metadata"
		}
		termsafe.Errorf(j.stderr, "verify: %d entries compared by %s: %d differ, %d missing, %d extra", v.compared, what, v.differ, v.missing, v.extras)
		if j.walkErrs > 0 || v.differ+v.missing+v.extras > 0 {
			code = Partial
		}
	}
	// --json: the counts, for bulkmove verify-summary to merge the shards'.
	ev := &VerifyEvent{Src: j.src, Dst: j.dst, Compared: v.compared, Differ: v.differ, Missing: v.missing,
		Extra: v.extras, Errors: j.walkErrs, Content: content, ExitCode: j.code(code)}
	if sh := j.flags.Scale.Shard; !sh.All() {
		ev.Shard = sh.String()
	}
	if err != nil {
		ev.Error = err.Error()
	}
	j.ev.emit("verify", &ev.Head, ev)
	return code
}

func (j *job) onVerified(v *verifier, r send.Result) {
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
		case j.ev != nil:
		case e.Msg == "missing":
			termsafe.Printf(j.stdout, "missing %s\n", path)
		default:
			termsafe.Printf(j.stdout, "differ %s: %s\n", path, e.Msg)
		}
		j.ev.problem("difference", path, e.Msg)
	}
}

func (j *job) onExtras(v *verifier, r *wire.PruneResult) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range r.Removed {
		v.extras++
		name := prunedName(e)
		if j.ev == nil {
			termsafe.Printf(j.stdout, "extra %s\n", name)
		}
		j.ev.problem("difference", e.Path, "extra")
	}
	for _, e := range r.Errors {
		termsafe.Errorf(j.stderr, "verify: %s", e)
		j.mu.Lock()
		j.walkErrs++
		j.mu.Unlock()
	}
}

func orNotDir(err error) error {
	if err != nil {
		return Unwrap(err)
	}
	return errors.New("not a directory")
}
