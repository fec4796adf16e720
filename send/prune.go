package send

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/wire"
)

// Pruner is implemented by connections that can delete, at the receiver,
// what the source does not have (--delete).
type Pruner interface {
	// Prune carries out req and calls done with each of its results
	// (one, or several when much is removed), in order.
	Prune(ctx context.Context, req *wire.PruneRequest, done func(*wire.PruneResult)) error
}

// Prune implements Pruner: one round trip, whose answer may come in
// several frames.
func (c *Client) Prune(ctx context.Context, req *wire.PruneRequest, done func(*wire.PruneResult)) error {
	if err := wire.WriteFrame(c.w, wire.Prune, wire.EncodePrune(req)); err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	for {
		f, err := c.next(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if f.typ != wire.Pruned {
			return fmt.Errorf("%s: %w: got frame %q, want the prune result", c.Name, wire.ErrProtocol, f.typ)
		}
		res, err := wire.DecodePruned(f.payload)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if res.ID != req.ID {
			return fmt.Errorf("%s: %w: prune result %d for request %d", c.Name, wire.ErrProtocol, res.ID, req.ID)
		}
		done(res)
		if !res.More {
			return nil
		}
	}
}

// RunPrune sends the requests from reqs over conns, one request in flight
// per connection (so K directories are pruned at once), calling done for
// each result, serialised. Each value received from reqs is a sequence of
// requests that must go one after the other on one connection (a
// directory in several parts, wire.PruneRequest.More); a sequence that
// ends on a request with More (the sender stopped listing) ends the run.
// Every connection must be a Pruner.
func RunPrune(ctx context.Context, conns []Conn, reqs <-chan <-chan *wire.PruneRequest, done func(*wire.PruneResult)) error {
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	for _, c := range conns {
		pr, ok := c.(Pruner)
		if !ok {
			return fmt.Errorf("this transport cannot delete")
		}
		g.Go(func() error {
			for {
				var seq <-chan *wire.PruneRequest
				select {
				case <-gctx.Done():
					return gctx.Err()
				case s, ok := <-reqs:
					if !ok {
						return nil
					}
					seq = s
				}
				var last *wire.PruneRequest
				for {
					var req *wire.PruneRequest
					select {
					case <-gctx.Done():
						return gctx.Err()
					case r, ok := <-seq:
						if !ok {
							if last != nil && last.More {
								return fmt.Errorf("delete: the names of %s stopped before their end", last.Dirs[len(last.Dirs)-1].Dir)
							}
							req = nil
						} else {
							req = r
						}
					}
					if req == nil {
						break
					}
					err := pr.Prune(gctx, req, func(res *wire.PruneResult) {
						mu.Lock()
						done(res)
						mu.Unlock()
					})
					if err != nil {
						return err
					}
					last = req
				}
			}
		})
	}
	return g.Wait()
}
