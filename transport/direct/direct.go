// Package direct is the transport of streams that go straight to an
// agent's data plane, over TLS or plain TCP (--transport tls, tcp): SSH
// (or whatever started the agent) hands over the agent's offer (its port,
// a one-time token and, for TLS, its certificate's fingerprint), and the
// job's K streams connect to that port, one TCP flow each. See package
// dataplane for both ends of a connection; this package is the sender's
// transport over it.
//
// The agent's data plane admits each stream index once and closes after
// K streams: a lost stream cannot come back over it, so this transport
// does not redial on its own. The SSH transport that starts the agent
// redials such a stream over SSH instead.
package direct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

// Transport opens a job's streams to an agent's data plane.
type Transport struct {
	transport.Fixed
	Host   string          // where the agent listens (a name or an address)
	Name   string          // the host as messages name it; Host if ""
	Offer  dataplane.Offer // what the agent offered
	Dialer *transport.Dialer
	// DialConn, if set, opens stream i's connection in place of
	// dataplane.Dial (a test puts a connection it can break in between).
	DialConn func(ctx context.Context, host string, o dataplane.Offer, i int) (net.Conn, error)

	opened transport.Opened
}

// Open implements transport.Transport: the k streams, opened at once.
// Those that open are the job's, with a warning for the others; if none
// does, the first failure is the error.
func (t *Transport) Open(ctx context.Context, k int) ([]send.Conn, error) {
	conns := make([]send.Conn, k)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			c, err := t.open(ctx, i)
			if err == nil {
				conns[i] = c
				return
			}
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	up := slices.DeleteFunc(slices.Clone(conns), func(c send.Conn) bool { return c == nil })
	if len(up) == 0 {
		return nil, firstErr
	}
	if firstErr != nil {
		t.Dialer.Warn("%v; going on with %d of %d streams", firstErr, len(up), k)
	}
	return up, nil
}

// open opens stream i.
func (t *Transport) open(ctx context.Context, i int) (*send.Client, error) {
	host := t.Name
	if host == "" {
		host = t.Host
	}
	name := fmt.Sprintf("%s stream %d (%s)", host, i, t.Offer.Mode)
	dial := t.DialConn
	if dial == nil {
		dial = dataplane.Dial
	}
	nc, err := dial(ctx, t.Host, t.Offer, i)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c, err := t.Dialer.Dial(ctx, name, "the agent on "+host, nc, nc, nc)
	if err != nil {
		// A refusal says who refused, and the handshake's other errors
		// name the stream already.
		nc.Close()
		if closedAtGreeting(err) {
			// The data plane says nothing to a stream it does not admit.
			err = fmt.Errorf("%w (the agent closed the stream after its greeting: not this job's token, or its index taken already)", err)
		}
		return nil, err
	}
	t.Dialer.Trace("%s ready", name)
	t.opened.Add(c)
	return c, nil
}

// closedAtGreeting reports whether a handshake failed because the peer
// closed the connection, without an answer.
func closedAtGreeting(err error) bool {
	return !wire.IsRefused(err) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "connection closed by the receiver"))
}

// Close implements transport.Transport: it drops every stream it opened
// (those the pool closed already are not affected).
func (t *Transport) Close() error {
	t.opened.Abort()
	return nil
}
