package send

import (
	"context"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// Result is what the sender learns about one batch.
type Result struct {
	Batch     *model.Batch
	Stream    int
	Final     bool
	Ack       *wire.BatchAck // the receiver's acknowledgement
	SrcErrors []source.Error // files the sender could not read or that changed
	// Again lists the entries that are not in place but go once more (they
	// changed while read, or arrived corrupted): not errors yet, and not
	// done either (a journal must not record them).
	Again []int
	// Need says which entries the receiver asked for (its quick check
	// found the others in place); nil when it asked for all of them.
	Need []bool
	// Deltas are the files that went as a block delta (their ack
	// says whether they landed).
	Deltas []source.Delta
}

// Failed returns the indexes of r's entries that are not in place at
// DEST: the receiver failed them (a corrupted one too), the sender could
// not read them, or they go once more (Again).
func (r Result) Failed() map[int]bool {
	bad := map[int]bool{}
	if r.Ack != nil {
		for _, e := range r.Ack.Errors {
			bad[e.Index] = true
		}
	}
	for _, e := range r.SrcErrors {
		bad[e.Index] = true
	}
	for _, i := range r.Again {
		bad[i] = true
	}
	return bad
}

// Conn is one stream to a receiver.
type Conn interface {
	// Run sends batches from in until in is closed, calling done for each
	// acknowledged batch. On failure it returns the batches that were sent
	// but not acknowledged, so that another stream can carry them.
	Run(ctx context.Context, in <-chan *model.Batch, done func(Result)) (unacked []*model.Batch, err error)
	// Final applies batches of deferred entries, in order, pipelined (not
	// waiting a round trip for each), calling done for each ack; it
	// returns once all are acknowledged.
	Final(ctx context.Context, bs []*model.Batch, done func(Result)) error
	// Close ends the stream and returns the receiver's totals.
	Close(ctx context.Context) (wire.Totals, error)
}
