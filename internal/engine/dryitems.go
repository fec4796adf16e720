package engine

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/wire"
)

// dryItems is -i with --dry-run: the walk's batches, and its directories,
// symlinks and hard links in batches of their own, go to DEST's
// receivers as questions (send.Itemizer), which compare as a move would
// and write nothing; their answers are printed as the move's -i lines.
// Asked in any order: nothing changes between the answers.
type dryItems struct {
	j     *job
	ctx   context.Context // ends the walk too if a question fails
	g     *errgroup.Group
	in    chan *model.Batch
	conns []send.Conn // nil once handed on
	shut  func()      // closes the transport
	chunk []model.Entry
	id    uint64 // the ids of the batches of deferred entries
}

// dryItemize starts asking, over new streams to DEST. A DEST not there
// is not made: its receivers take it as empty (wire.ReceiveOptions.DryRun).
func (j *job) dryItemize(ctx context.Context, p plan) (*dryItems, error) {
	d := &dryItems{j: j, in: make(chan *model.Batch, 2*j.flags.Jobs), id: 1 << 62}
	d.g, d.ctx = errgroup.WithContext(ctx)
	done := func(r send.Result) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.itemize(r)
	}
	conns, cleanup, err := j.connect(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		if _, ok := c.(send.Itemizer); !ok {
			closeAll(ctx, conns)
			cleanup()
			return nil, errors.New("-i with --dry-run: this transport cannot ask DEST what would change")
		}
	}
	d.conns, d.shut = conns, cleanup
	sums := j.receiveOptions().Check == wire.CheckSum
	for _, c := range conns {
		d.g.Go(func() error { return c.(send.Itemizer).Would(d.ctx, d.in, sums, done) })
	}
	return d, nil
}

// batch asks about a batch of the walk's.
func (d *dryItems) batch(b *model.Batch) {
	select {
	case d.in <- b:
	case <-d.ctx.Done():
	}
}

// deferred asks about a directory, symlink or hard link, in batches of
// --batch-files.
func (d *dryItems) deferred(e model.Entry) {
	d.chunk = append(d.chunk, e)
	if len(d.chunk) >= max(d.j.flags.BatchFiles, 1) {
		d.flush()
	}
}

func (d *dryItems) flush() {
	if len(d.chunk) == 0 {
		return
	}
	d.id++
	d.batch(&model.Batch{ID: d.id, Entries: d.chunk})
	d.chunk = nil
}

// wait asks the last questions and waits for their answers.
func (d *dryItems) wait() error {
	d.flush()
	close(d.in)
	return d.g.Wait()
}

// close closes the streams not handed on (to --delete's dry run) and
// the transport.
func (d *dryItems) close() {
	closeAll(context.Background(), d.conns)
	d.shut()
}

// closeAll closes conns.
func closeAll(ctx context.Context, conns []send.Conn) {
	for _, c := range conns {
		c.Close(ctx)
	}
}
