package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/engine/verify"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport/sshx"
)

// Verify compares SRC with DEST (j.Config.Check must have passed; a
// local SRC), content too unless content is false, and lists each
// difference on j.Stdout (package verify). Partial: a difference.
func (j Job) Verify(ctx context.Context, content bool) Outcome {
	jb := j.newJob(j.Stderr)
	if j.Config.JSON {
		jb.ev = newEvents(j.Stdout)
	}
	o := jb.verifyJob(ctx, content)
	jb.verifyEndIfNone(o, content)
	return o
}

func (j *job) verifyJob(ctx context.Context, content bool) Outcome {
	if t, remote, _ := sshx.ParseTarget(j.src); remote {
		if d, r, err := sshx.ParseTarget(j.dst); r && err == nil {
			// box1 compares with box2, by the path a move would take.
			j.verifyAs = "meta"
			if content {
				j.verifyAs = "content"
			}
			return j.remoteToRemote(ctx, t, d)
		}
		return j.fail(UsageError, errors.New("verify: SRC must be local or, with a remote DEST, on another host (run bulkmove verify on the source host)"))
	}
	p, code := j.resolve(ctx)
	if code != Done {
		return code
	}
	j.flags.Owners.source(&p.src)
	return j.verify(ctx, p, content)
}

// verifyEndIfNone writes, with --json, the verify event of a verify
// that ended as o before it compared (as endIfNone a job's end event):
// verify-summary then names its error.
func (j *job) verifyEndIfNone(o Outcome, content bool) {
	if j.ev == nil || j.ev.writer().Ended() {
		return
	}
	ev := &VerifyEvent{Src: j.src, Dst: j.dst, Content: content, ExitCode: j.code(o), Error: outcomeWords[o]}
	if j.failure != nil {
		ev.Error = j.failure.Error()
	}
	if sh := j.flags.Scale.Shard; !sh.All() {
		ev.Shard = sh.String()
	}
	j.ev.emit("verify", &ev.Head, ev)
}

// VerifySummary merges the reports of verify --shard i/N --json, files
// (one a shard), into one (verify.Summary). Partial: a difference;
// Failed: a report missing, repeated, incomplete or failed.
func VerifySummary(files []string, stdout, stderr io.Writer) Outcome {
	return verifyOutcome(verify.Summary(files, stdout, stderr))
}

// verify opens the streams to DEST and has package verify compare over
// them the part of SRC this process would move.
func (j *job) verify(ctx context.Context, p plan, content bool) Outcome {
	if j.remote == nil {
		if fi, err := os.Stat(p.dstRoot); err != nil || !fi.IsDir() {
			return j.fail(Failed, fmt.Errorf("verify: destination %s: %w", j.dst, orNotDir(err)))
		}
	}
	conns, cleanup, err := j.connect(ctx, p)
	if err != nil {
		return j.fail(Failed, err)
	}
	defer cleanup()
	opt := verify.Options{
		Src: j.src, Dst: j.dst, WalkRoot: p.walkRoot, Rename: p.rename, Content: content, Shard: j.flags.Scale.Shard,
		Stdout: j.stdout, Stderr: j.stderr, Events: j.ev.writer(),
		ExitCode: func(s verify.Status) int { return j.code(verifyOutcome(s)) },
		Walk: sharder.Options{
			BatchBytes:    int64(j.flags.BatchSize),
			BatchFiles:    j.flags.BatchFiles,
			Filter:        j.flags.Rules,
			OneFileSystem: j.flags.OneFS,
		},
	}
	if p.src.File != "" {
		opt.Walk.Name = filepath.Base(j.src) // a symlink's name, if SRC is one
	}
	j.flags.Faithful.walk(&opt.Walk)
	opt.Walk.FakeSuper, _ = j.fakeSuper()
	// --shard i/N and --files-from: the part this process moved.
	closeList, err := j.flags.Scale.apply(&opt.Walk, j.stdin)
	if err != nil {
		return j.fail(UsageError, err)
	}
	defer closeList()
	if p.rename == "" && j.flags.Scale.FilesFrom == "" {
		// What DEST has beyond SRC (a list does not say what else a
		// directory may hold: not with --files-from).
		src := j.deleteSource(p)
		opt.Extras = &src
	}
	return verifyOutcome(verify.Run(ctx, conns, opt))
}

// verifyOutcome is the outcome of a verify status.
func verifyOutcome(s verify.Status) Outcome {
	switch s {
	case verify.Same:
		return Done
	case verify.Differ:
		return Partial
	case verify.Interrupted:
		return Interrupted
	}
	return Failed
}

func orNotDir(err error) error {
	if err != nil {
		return paths.Unwrap(err)
	}
	return errors.New("not a directory")
}
