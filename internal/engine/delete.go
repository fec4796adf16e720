package engine

import (
	"context"
	"os"

	"github.com/bulkmove/bulkmove/internal/engine/deletion"
	"github.com/bulkmove/bulkmove/send"
)

// deleteSource is the SRC whose listing --delete (and verify's extras)
// keeps at DEST.
func (j *job) deleteSource(p plan) deletion.Source {
	return deletion.Source{Name: j.src, Root: p.walkRoot, Rules: j.flags.Rules, DeleteExcluded: j.flags.DeleteExcluded, Shard: j.flags.Scale.Shard, Links: j.flags.Select.links()}
}

// deleter is the job's --delete (package deletion): it counts the
// entries it cannot remove among the job's errors, and deletes nothing
// if the job had any before it (unless --ignore-errors).
func (j *job) deleter(p plan) *deletion.Deleter {
	md := int64(-1)
	if j.flags.MaxDelete.set {
		md = j.flags.MaxDelete.n
	}
	var deleted, failed func(string)
	if j.out != nil || j.logFmt != nil {
		deleted = j.itemizeDeleted
	}
	if j.logFmt != nil {
		failed = j.logDeleteFailed
	}
	return deletion.New(deletion.Options{
		Source: j.deleteSource(p), Dst: j.dst,
		NoGuard: j.flags.NoDeleteGuard, MaxDelete: md, Verbose: j.flags.Verbose, BackedUp: j.noteBackup,
		Stdout: j.listing(), Stderr: j.stderr, Trace: j.trace, Deleted: deleted, Failed: failed,
		Failures: func() int64 {
			if j.flags.Select.IgnoreErrors {
				return 0 // --ignore-errors: delete all the same, as rsync
			}
			j.mu.Lock()
			defer j.mu.Unlock()
			return j.failed + j.walkErrs
		},
		AddErrors: func(n int64) {
			j.mu.Lock()
			j.failed += n
			j.mu.Unlock()
		},
	})
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
		return j.fail(Failed, err)
	}
	defer cleanup()
	return j.dryRunDeleteOver(ctx, p, conns)
}

// dryRunDeleteOver is dryRunDelete over streams open already, which it
// closes.
func (j *job) dryRunDeleteOver(ctx context.Context, p plan, conns []send.Conn) Outcome {
	j.del = j.deleter(p)
	if err := j.del.DryRun(ctx, conns); err != nil {
		return j.fail(Failed, err)
	}
	if j.del.Stats().Held > 0 {
		return MaxDeleteHeld
	}
	return Done
}
