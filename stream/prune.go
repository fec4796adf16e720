package stream

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// Pruner is implemented by connections that can delete, at the receiver,
// what the source does not have (--delete).
type Pruner interface {
	Prune(ctx context.Context, req *wire.PruneRequest) (*wire.PruneResult, error)
}

// ApplyPrune carries out a prune request on a receiver: in each directory,
// everything the request does not name goes, except what the request's
// filter rules protect. A bad rule fails the request; a path that cannot
// be deleted is reported in the result.
func ApplyPrune(recv *extract.Receiver, req *wire.PruneRequest) (*wire.PruneResult, error) {
	var protect extract.PruneFunc
	if len(req.Rules) > 0 {
		rules := new(filter.Rules)
		for _, r := range req.Rules {
			if err := rules.Add(r); err != nil {
				return nil, fmt.Errorf("%w: %v", wire.ErrProtocol, err)
			}
		}
		protect = func(p string, isDir bool) bool { return rules.Protected(p, isDir, req.DeleteExcluded) }
	}
	res := &wire.PruneResult{ID: req.ID}
	for _, d := range req.Dirs {
		keep := make(map[string]bool, len(d.Names))
		for _, n := range d.Names {
			keep[n] = true
		}
		removed, err := recv.Prune(d.Dir, keep, protect, req.DryRun)
		for _, r := range removed {
			res.Removed = append(res.Removed, wire.PrunedEntry{Path: r.Path, IsDir: r.IsDir})
		}
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	return res, nil
}

// Prune implements Pruner.
func (l *Local) Prune(ctx context.Context, req *wire.PruneRequest) (*wire.PruneResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ApplyPrune(l.Recv, req)
}

// Prune implements Pruner: one round trip.
func (c *Client) Prune(ctx context.Context, req *wire.PruneRequest) (*wire.PruneResult, error) {
	if err := wire.WriteFrame(c.w, wire.Prune, wire.EncodePrune(req)); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	if err := c.w.Flush(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	f, err := c.next(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	if f.typ != wire.Pruned {
		return nil, fmt.Errorf("%s: %w: got frame %q, want the prune result", c.Name, wire.ErrProtocol, f.typ)
	}
	res, err := wire.DecodePruned(f.payload)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	if res.ID != req.ID {
		return nil, fmt.Errorf("%s: %w: prune result %d for request %d", c.Name, wire.ErrProtocol, res.ID, req.ID)
	}
	return res, nil
}

// RunPrune sends the requests from reqs over conns, one request in flight
// per connection (so K directories are pruned at once), calling done for
// each result, serialised. Every connection must be a Pruner.
func RunPrune(ctx context.Context, conns []Conn, reqs <-chan *wire.PruneRequest, done func(*wire.PruneResult)) error {
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	for _, c := range conns {
		pr, ok := c.(Pruner)
		if !ok {
			return fmt.Errorf("this transport cannot delete")
		}
		g.Go(func() error {
			for {
				var req *wire.PruneRequest
				select {
				case <-gctx.Done():
					return gctx.Err()
				case r, ok := <-reqs:
					if !ok {
						return nil
					}
					req = r
				}
				res, err := pr.Prune(gctx, req)
				if err != nil {
					return err
				}
				mu.Lock()
				done(res)
				mu.Unlock()
			}
		})
	}
	return g.Wait()
}
