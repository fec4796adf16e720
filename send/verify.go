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
