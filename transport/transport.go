// Package transport is how a job's streams reach the receiver: one
// Transport interface, which every way of moving data implements, and what
// those implementations share (Dialer, Fixed).
//
// A transport opens the K streams of one job to one receiver (a receiving
// process, or the receiver of this process) and gives the sending pool a
// send.Conn for each. The pool does not know how a stream travels: it
// runs batches over the Conns, asks the transport for a stream again when
// one fails (Redial), for one more when -j auto adds streams (Add), and
// for the round trip to the receiving host, from which -j auto judges how
// far it is (RTT, Prepare).
//
// The implementations, each in a package of its own below this one:
//
//	transport/local     the receiver in this process: no wire, no copy through a socket
//	transport/direct    TLS or TCP straight to an agent's data plane (--transport tls, tcp)
//	transport/serve     a `bulkmove serve` daemon (bulkmove://HOST:PORT/NAME/PATH)
//	transport/viaagent  K local agent processes over pipes (--via-agent)
//	transport/accepted  streams open before the job: those a pull's send-hub serves
//	transport/ssh       a push over SSH: the agent it starts, its streams over SSH or its data plane
//
// (transport/sshx is the SSH client, transport/dataplane both ends of a
// data-plane connection; the engine chooses one transport per job.)
//
// Package transporttest is the conformance suite every transport passes:
// a tree with every kind of entry, a cut stream, a redial, a stall and a
// refused handshake.
//
// This package sits between the sending side (package send's pool and
// client, whose Conn it hands out) and the ways of reaching a receiver. It
// must not import the engine or cmd; its implementations may import the
// receiving side only to run a receiver in this process (local).
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// Transport opens and keeps the streams of one job to one receiver.
//
// The contract every implementation keeps (and transporttest checks):
//
//   - Open(ctx, k) opens up to k streams of the job, all to the same
//     receiver (so that a hard link may point at a file any stream wrote),
//     and returns them in stream order: the i-th Conn is stream i, for
//     Redial. It returns at least one Conn, or an error; fewer than k only
//     when the others could not be opened, after saying so (Dialer.Warnf).
//     A receiver that refuses the job (a wrong token, a protocol of
//     another version, a destination it will not open) makes Open fail
//     with that refusal (a wire.RefusedError, or an error naming both
//     protocol versions, wire.ErrVersion) before anything is written.
//     Open is called once.
//   - Redial(ctx, i) opens stream i again after its connection failed,
//     to the same job at the same receiver when it still runs (its
//     receiver then already holds the batches acknowledged so far), else
//     to a new one. The Conn it returns replaces the failed one, which
//     the pool does not use again. ctx is the job's: the new connection
//     lives as long as it. An error the pool must not retry is permanent
//     (send.Permanent, or a refusal). Without Caps().Redial it fails
//     with ErrUnsupported, and the pool goes on without the stream.
//   - Add(ctx, i) opens one more stream of the job while it sends file
//     data (-j auto); i is the index the stream will most likely have.
//     Without Caps().Add it fails with ErrUnsupported.
//   - RTT is the network round trip to the receiving host, measured once
//     (the first call may wait for it); 0 where there is no network or it
//     is not known.
//   - Prepare(ctx, n) starts opening n connections for Add ahead of it
//     (over a far path a connection takes several round trips to open);
//     the done it returns closes those Add did not take. A transport with
//     nothing to prepare returns a done that does nothing.
//   - Close, called once after the pool has closed every stream it was
//     given (or after Open failed, or without Open), releases what the
//     transport holds (connections, processes, the local receiver) and
//     drops the streams the pool did not close; it returns the first
//     error doing so.
type Transport interface {
	Open(ctx context.Context, k int) ([]send.Conn, error)
	Redial(ctx context.Context, i int) (send.Conn, error)
	Add(ctx context.Context, i int) (send.Conn, error)
	RTT() time.Duration
	Prepare(ctx context.Context, n int) (done func())
	// Caps says which of Redial and Add the transport can do.
	Caps() Caps
	Close() error
}

// Caps are what a transport can do beyond opening its streams.
type Caps struct {
	Redial bool // Redial opens a lost stream again
	Add    bool // Add opens more streams (-j auto)
}

// ErrUnsupported is what Redial and Add fail with on a transport that
// cannot do them (see Caps).
var ErrUnsupported = errors.ErrUnsupported

// Fixed is a transport's part for what it does not do: embedded in an
// implementation, it answers Redial and Add with ErrUnsupported, RTT with
// 0 and Prepare with nothing to do, and Caps with none of them. An
// implementation overrides what it does.
type Fixed struct{}

// Redial implements Transport: unsupported.
func (Fixed) Redial(context.Context, int) (send.Conn, error) {
	return nil, fmt.Errorf("redial: %w", ErrUnsupported)
}

// Add implements Transport: unsupported.
func (Fixed) Add(context.Context, int) (send.Conn, error) {
	return nil, fmt.Errorf("add a stream: %w", ErrUnsupported)
}

// RTT implements Transport: not known.
func (Fixed) RTT() time.Duration { return 0 }

// Prepare implements Transport: nothing to prepare.
func (Fixed) Prepare(context.Context, int) func() { return func() {} }

// Caps implements Transport: neither Redial nor Add.
func (Fixed) Caps() Caps { return Caps{} }

// Dialer is what every transport that carries the wire protocol shares:
// it runs the stream handshake over a connection the transport opened, as
// the job asks (its receive options and source), and sets up the client
// it gets as the job wants it (stall timeout, compression, ...). It also
// carries the job's warnings and traces, which a transport reports
// through.
type Dialer struct {
	Version string              // this bulkmove's version, for the handshake
	Options wire.ReceiveOptions // what the receiver is asked for
	Src     source.Source       // where the files are read from
	// Configure, if set, sets up each client after its handshake, before
	// the pool runs it (the job's stall timeout, compression, ...).
	Configure func(*send.Client)
	// Warnf, if set, reports a stream that could not be opened while the
	// job goes on without it.
	Warnf func(format string, args ...any)
	// Tracef, if set, reports the phases of opening (for -v).
	Tracef func(format string, args ...any)
}

// Dial runs the handshake of stream name over r and w (the connection's
// two directions; closer closes it, on failure too) and configures the
// client. A refusal names who refused (e.g. "serve HOST": see
// wire.RefusedBy).
func (d *Dialer) Dial(ctx context.Context, name, who string, r io.Reader, w io.Writer, closer io.Closer) (*send.Client, error) {
	c, err := send.Dial(ctx, name, r, w, closer, d.Version, d.Options, d.Src)
	if err != nil {
		return nil, wire.RefusedBy(who, err)
	}
	if d.Configure != nil {
		d.Configure(c)
	}
	return c, nil
}

// Warn reports through Warnf, if set.
func (d *Dialer) Warn(format string, args ...any) {
	if d != nil && d.Warnf != nil {
		d.Warnf(format, args...)
	}
}

// Trace reports through Tracef, if set.
func (d *Dialer) Trace(format string, args ...any) {
	if d != nil && d.Tracef != nil {
		d.Tracef(format, args...)
	}
}

// Opened keeps the clients a transport opened, for its Close to drop
// those the pool did not close. The zero value is ready for use.
type Opened struct {
	mu sync.Mutex
	cs []*send.Client
}

// Add keeps c.
func (o *Opened) Add(c *send.Client) {
	o.mu.Lock()
	o.cs = append(o.cs, c)
	o.mu.Unlock()
}

// Abort drops every client kept (those closed already are not affected)
// and forgets them.
func (o *Opened) Abort() {
	o.mu.Lock()
	cs := o.cs
	o.cs = nil
	o.mu.Unlock()
	for _, c := range cs {
		c.Abort()
	}
}

// Splice copies between a and b both ways until both directions end,
// passing on each end of input (a half-close where the connection has
// one), then closes both: a relay of a stream it need not read.
func Splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	cp := func(dst, src io.ReadWriteCloser) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
