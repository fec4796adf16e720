package sharder

import (
	"context"

	"github.com/bulkmove/bulkmove/model"
)

// partitioner cuts a stream of regular files into batches balanced by cost:
// the sum of the files' sizes plus a fixed per-file overhead.
//
// Files are appended in the order they arrive, so the files of one directory
// chunk stay together. A batch is closed (sent on out) when adding the next
// file would take its cost over maxBytes, or once it holds maxFiles files, or
// once its cost reaches maxBytes; a file costing more than maxBytes on its own
// therefore travels alone. The send on out blocks: a slow consumer stops the
// partitioner, which stops the walk, which bounds memory.
//
// A partitioner is used by one goroutine.
type partitioner struct {
	maxBytes int64
	maxFiles int
	fileCost int64
	out      chan<- *model.Batch

	cur     *model.Batch
	cost    int64  // cost of cur
	lastID  uint64 // ID of the last batch created
	batches int64  // batches sent
}

func newPartitioner(maxBytes int64, maxFiles int, fileCost int64, out chan<- *model.Batch) *partitioner {
	return &partitioner{maxBytes: maxBytes, maxFiles: maxFiles, fileCost: fileCost, out: out}
}

// add appends one regular file, sending batches that become full.
func (p *partitioner) add(ctx context.Context, e model.Entry) error {
	c := p.fileCost + e.DataLen()
	if p.cur != nil && len(p.cur.Entries) > 0 && p.cost+c > p.maxBytes {
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
	if p.cur == nil {
		p.lastID++
		p.cur = &model.Batch{ID: p.lastID, Entries: make([]model.Entry, 0, min(p.maxFiles, 4096))}
		p.cost = 0
	}
	p.cur.Entries = append(p.cur.Entries, e)
	p.cur.Bytes += e.DataLen()
	p.cost += c
	if len(p.cur.Entries) >= p.maxFiles || p.cost >= p.maxBytes {
		return p.flush(ctx)
	}
	return nil
}

// flush sends the current batch, if it holds anything.
func (p *partitioner) flush(ctx context.Context) error {
	b := p.cur
	if b == nil || len(b.Entries) == 0 {
		return nil
	}
	// Check first: a select with both ready picks at random.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case p.out <- b:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.cur = nil
	p.cost = 0
	p.batches++
	return nil
}
