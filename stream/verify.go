package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// Verifier is implemented by connections that can compare batches with
// what the receiver holds (bulkmove verify).
type Verifier interface {
	// Verify sends batches from in until it is closed, calling done with
	// each batch's differences (Ack.Errors, code wire.CodeDiffer). With
	// content set, regular files are compared by content hash too.
	Verify(ctx context.Context, in <-chan *sharder.Batch, content bool, done func(Result)) error
}

// Verify implements Verifier, Window batches in flight.
func (c *Client) Verify(ctx context.Context, in <-chan *sharder.Batch, content bool, done func(Result)) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", c.Name, err)
			c.shut()
		}
	}()
	var queue []*sharder.Batch
	for in != nil || len(queue) > 0 {
		var src <-chan *sharder.Batch
		if in != nil && len(queue) < Window {
			src = in
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-src:
			if !ok {
				in = nil
				continue
			}
			m := &wire.BatchManifest{ID: b.ID, Flags: wire.FlagVerify, Entries: b.Entries}
			if content {
				m.Sums = c.Src.Sums(b.Entries)
			}
			if err := wire.WriteFrame(c.w, wire.Manifest, wire.EncodeManifest(m)); err != nil {
				return err
			}
			queue = append(queue, b)
		case f, ok := <-c.frames:
			if !ok {
				return errors.New("connection closed by the receiver")
			}
			if f.err != nil {
				return f.err
			}
			if f.typ != wire.Ack {
				return fmt.Errorf("%w: unexpected frame %q while verifying", wire.ErrProtocol, f.typ)
			}
			a, err := wire.DecodeAck(f.payload)
			if err != nil {
				return err
			}
			if len(queue) == 0 || queue[0].ID != a.ID {
				return fmt.Errorf("%w: verify answer for batch %d, which is not the oldest in flight", wire.ErrProtocol, a.ID)
			}
			b := queue[0]
			queue = queue[1:]
			for _, e := range a.Errors {
				if e.Index < 0 || e.Index >= len(b.Entries) {
					return fmt.Errorf("%w: verify answer for batch %d names entry %d of %d", wire.ErrProtocol, a.ID, e.Index, len(b.Entries))
				}
			}
			done(Result{Batch: b, Ack: a})
		}
	}
	return c.w.Flush()
}

// Verify implements Verifier.
func (l *Local) Verify(ctx context.Context, in <-chan *sharder.Batch, content bool, done func(Result)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-in:
			if !ok {
				return nil
			}
			var sums []wire.Sum
			if content {
				sums = l.Src.Sums(b.Entries)
			}
			done(Result{Batch: b, Ack: &wire.BatchAck{ID: b.ID, Errors: l.Recv.Verify(b.Entries, sums)}})
		}
	}
}
