// Package accepted is the transport over streams that are open already
// when the job starts: the send-hub of a pull (`bulkmove --send-hub`, on the
// host that holds SRC) serves the K connections its puller opened to it,
// each with an agent at the other end. The sender speaks first on each,
// as on any stream.
//
// The puller opened the connections, so only it could open one again:
// this transport neither redials nor adds streams.
package accepted

import (
	"context"
	"fmt"
	"io"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
)

// Stream is one connection handed to the job: what the receiver says,
// what goes to it, and what closes it (nil: nothing to close).
type Stream struct {
	R io.Reader
	W io.Writer
	C io.Closer
}

// Transport runs the job over Streams.
type Transport struct {
	transport.Fixed
	Streams []Stream
	Dialer  *transport.Dialer

	opened transport.Opened
}

// Open implements transport.Transport: the handshake on each stream, in
// order. The job runs on the streams it was handed, whatever k asks (fewer
// may have joined). A stream that fails the handshake fails the job.
func (t *Transport) Open(ctx context.Context, k int) ([]send.Conn, error) {
	var conns []send.Conn
	for i, s := range t.Streams {
		c, err := t.Dialer.Dial(ctx, fmt.Sprintf("stream %d", i), "the puller's agent", s.R, s.W, s.C)
		if err != nil {
			t.opened.Abort()
			return nil, err
		}
		t.opened.Add(c)
		conns = append(conns, c)
	}
	return conns, nil
}

// Close implements transport.Transport: it drops the streams the pool did
// not close.
func (t *Transport) Close() error {
	t.opened.Abort()
	return nil
}
