package main

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// pruneChunk is about how many names go in one prune request.
const pruneChunk = 4096

// deletePass returns the --delete pass, run by the pool after the file
// data and hard links and before directory metadata. It lists SRC again,
// one directory at a time and a large one in parts of about
// sharder.ListChunk names (the receiver gathers a directory's parts, and
// past extract.PruneMem names spills them to disk, so memory does not grow
// with the directory), and the receivers remove from each DEST directory what the
// source directory does not hold, K directories at once. Nothing is
// deleted if anything failed so far: a source file that could not be read
// must not cost its copy (rsync: "IO error encountered -- skipping file
// deletion").
func (j *job) deletePass(p plan, dryRun bool) func(context.Context, []stream.Conn) error {
	return j.prunePass(p, dryRun, func(r *wire.PruneResult) { j.onPruned(r, dryRun) })
}

// prunePass lists SRC one directory at a time and has the receivers prune
// (or, dryRun, list) what DEST has beyond it, K directories at once;
// report gets every result.
func (j *job) prunePass(p plan, dryRun bool, report func(*wire.PruneResult)) func(context.Context, []stream.Conn) error {
	return func(ctx context.Context, conns []stream.Conn) error {
		j.mu.Lock()
		bad := j.failed + j.walkErrs
		j.mu.Unlock()
		if bad > 0 {
			errorf(j.stderr, "not deleting anything at %s: %d errors during the transfer", j.dst, bad)
			j.mu.Lock()
			j.deleteSkipped = true
			j.mu.Unlock()
			return nil
		}
		j.trace("deleting what SRC does not have")
		rules := j.flags.rules.List()
		// A sequence of requests for one connection: small directories
		// packed into one request, or one large directory in parts.
		reqs := make(chan (<-chan *wire.PruneRequest), len(conns))
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error {
			defer close(reqs)
			var cur *wire.PruneRequest
			var big chan *wire.PruneRequest // the parts of the directory being listed
			var id uint64
			n := 0
			send := func(ch chan<- *wire.PruneRequest, r *wire.PruneRequest) error {
				select {
				case ch <- r:
					return nil
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			flush := func() error {
				if cur == nil {
					return nil
				}
				one := make(chan *wire.PruneRequest, 1)
				one <- cur
				close(one)
				cur, n = nil, 0
				select {
				case reqs <- one:
					return nil
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			request := func() *wire.PruneRequest {
				id++
				return &wire.PruneRequest{ID: id, DryRun: dryRun, DeleteExcluded: j.flags.deleteExcluded, Rules: rules}
			}
			err := sharder.ListDirs(gctx, p.walkRoot, j.flags.rules, func(dir string, names []string, more bool) error {
				if !j.flags.scale.shard.OwnsDir(dir) {
					return nil // --shard: another part's directory
				}
				if big == nil && more {
					// A large directory: its parts go one after the
					// other on one connection, as they are listed.
					if err := flush(); err != nil {
						return err
					}
					big = make(chan *wire.PruneRequest, 1)
					select {
					case reqs <- big:
					case <-gctx.Done():
						return gctx.Err()
					}
				}
				if big != nil {
					r := request()
					r.More = more
					r.Dirs = []wire.PruneDir{{Dir: dir, Names: names}}
					if err := send(big, r); err != nil {
						return err
					}
					if !more {
						close(big)
						big = nil
					}
					return nil
				}
				if cur != nil && n+len(names) > pruneChunk {
					if err := flush(); err != nil {
						return err
					}
				}
				if cur == nil {
					cur = request()
				}
				cur.Dirs = append(cur.Dirs, wire.PruneDir{Dir: dir, Names: names})
				n += len(names) + 1
				return nil
			})
			if err != nil {
				// big stays open: the cancellation ends its connection's
				// sequence, not a request that looks like its last.
				return fmt.Errorf("delete: reading %s again: %w (nothing more deleted)", j.src, err)
			}
			return flush()
		})
		g.Go(func() error {
			return stream.RunPrune(gctx, conns, reqs, report)
		})
		return g.Wait()
	}
}

// prunedName is how a removed (or extra) entry is listed: directories
// with a trailing '/'.
func prunedName(e wire.PrunedEntry) string {
	if e.IsDir {
		return e.Path + "/"
	}
	return e.Path
}

func (j *job) onPruned(r *wire.PruneResult, dryRun bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range r.Removed {
		j.deleted++
		name := prunedName(e)
		switch {
		case dryRun:
			fmt.Fprintf(j.stdout, "delete %s\n", name)
		case j.flags.verbose:
			errorf(j.stderr, "deleted %s", name)
		}
	}
	for _, e := range r.Errors {
		j.failed++
		errorf(j.stderr, "%s: %s", j.dst, e)
	}
}

// dryRunDelete lists what --delete would remove, for --dry-run: it
// connects to the receiver but moves nothing.
func (j *job) dryRunDelete(ctx context.Context, p plan) int {
	if j.remote == nil && j.hub == nil {
		if _, err := os.Stat(p.dstRoot); err != nil {
			return exitOK // no DEST yet: nothing to delete
		}
	}
	conns, cleanup, err := j.connect(ctx, p)
	if err != nil {
		errorf(j.stderr, "%v", err)
		return exitFatal
	}
	defer cleanup()
	err = j.deletePass(p, true)(ctx, conns)
	for _, c := range conns {
		c.Close(ctx)
	}
	if err != nil {
		errorf(j.stderr, "%v", err)
		return exitFatal
	}
	errorf(j.stderr, "dry run: would delete %d entries", j.deleted)
	return exitOK
}
