package send

import (
	"context"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Verifier is implemented by connections that can compare batches with
// what the receiver holds (bulkmove verify).
type Verifier interface {
	// Verify sends batches from in until it is closed, calling done with
	// each batch's differences (Ack.Errors, code wire.CodeDiffer). With
	// content set, regular files are compared by content hash too.
	Verify(ctx context.Context, in <-chan *model.Batch, content bool, done func(Result)) error
}

// Verify implements Verifier, wire.Window batches in flight.
func (c *Client) Verify(ctx context.Context, in <-chan *model.Batch, content bool, done func(Result)) error {
	_, err := c.run(ctx, in, wire.FlagVerify, content, done)
	return err
}

// Itemizer is implemented by connections that can ask what a move of
// batches would change (-i with --dry-run).
type Itemizer interface {
	// Would sends batches from in until it is closed, calling done with
	// each batch's items (Ack.Items) of what a move would change; the
	// receiver writes nothing. With sums set (checksum mode), the
	// manifests carry the files' content hashes.
	Would(ctx context.Context, in <-chan *model.Batch, sums bool, done func(Result)) error
}

// Would implements Itemizer, wire.Window batches in flight.
func (c *Client) Would(ctx context.Context, in <-chan *model.Batch, sums bool, done func(Result)) error {
	_, err := c.run(ctx, in, wire.FlagItemize, sums, done)
	return err
}
