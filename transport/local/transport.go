package local

import (
	"context"

	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport"
)

// Transport is the local transport: streams to one receiver opened in
// this process. It adds streams (Add: another Conn on the same receiver)
// and has no connection to redial, nor a round trip.
type Transport struct {
	transport.Fixed
	Recv *extract.Receiver
	Src  source.Source
}

// New opens the receiver at root with opt, for streams reading from src.
func New(root string, opt extract.Options, src source.Source) (*Transport, error) {
	recv, err := extract.Open(root, opt)
	if err != nil {
		return nil, err
	}
	return &Transport{Recv: recv, Src: src}, nil
}

// Open implements transport.Transport: k Conns on the receiver.
func (t *Transport) Open(_ context.Context, k int) ([]send.Conn, error) {
	conns := make([]send.Conn, k)
	for i := range conns {
		conns[i] = t.conn()
	}
	return conns, nil
}

// Add implements transport.Transport: one more Conn on the receiver.
func (t *Transport) Add(context.Context, int) (send.Conn, error) { return t.conn(), nil }

// Caps implements transport.Transport.
func (t *Transport) Caps() transport.Caps { return transport.Caps{Add: true} }

// Close implements transport.Transport: it closes the receiver.
func (t *Transport) Close() error { return t.Recv.Close() }

func (t *Transport) conn() *Conn { return &Conn{Recv: t.Recv, Src: t.Src} }
