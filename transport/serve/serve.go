// Package serve is the transport to a `bulkmove serve` daemon (a DEST of
// bulkmove://HOST:PORT/NAME/PATH): each of the job's streams is a TLS 1.3
// connection of its own, which greets the server with the token, the job's
// id, its index and the destination (dataplane.Greeting), then speaks the
// wire protocol. The streams of one job (one id) share a receiver there.
//
// A lost stream is dialled again as a new connection of the same job
// (Redial). The server's streams and jobs are bounded (serve's limits), so
// this transport does not add streams.
//
// It is the sending side's: the daemon itself is receive/serve.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

// Credentials are how the sender proves itself to the server and checks
// the server's certificate (the sender's --token-file, --fingerprint,
// --ca, --tls-cert, --tls-key): the server's certificate is pinned by its
// fingerprint or verified with a CA; the sender presents a token, a client
// certificate, or both.
type Credentials struct {
	TokenFile, Fingerprint, CA, Cert, Key string
}

// Transport opens a job's streams to a serve daemon.
type Transport struct {
	transport.Fixed
	Addr   string // HOST:PORT
	TLS    *tls.Config
	Token  string
	Dest   string // NAME/PATH, as the server resolves it
	Dialer *transport.Dialer

	job string // the job's id, one per Transport

	opened transport.Opened
}

// New is the transport to the server at addr for a job into dest
// (NAME/PATH), with the TLS settings and the token cred gives.
func New(addr, dest string, cred Credentials, d *transport.Dialer) (*Transport, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", addr, err)
	}
	cfg, err := dataplane.ClientConfig(host, cred.CA, cred.Fingerprint, cred.Cert, cred.Key)
	if err != nil {
		return nil, err
	}
	var token string
	if cred.TokenFile != "" {
		if token, err = dataplane.ReadToken(cred.TokenFile); err != nil {
			return nil, err
		}
	}
	return &Transport{Addr: addr, TLS: cfg, Token: token, Dest: dest, Dialer: d}, nil
}

// serveDialing is how many streams a sender opens to serve at once.
const serveDialing = 16

// Open implements transport.Transport: the k streams, at most
// serveDialing handshakes at once (below serve's limit per address,
// --max-peer-handshakes, which closes more at once). A refusal of any
// stream is the job's (the server would refuse every stream of it); else
// the streams that opened are the job's, with a warning for the others.
func (t *Transport) Open(ctx context.Context, k int) ([]send.Conn, error) {
	if t.job == "" {
		var id [12]byte
		rand.Read(id[:])
		t.job = hex.EncodeToString(id[:])
	}
	conns := make([]*send.Client, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, serveDialing)
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			conns[i], errs[i] = t.dial(ctx, i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		var refused *wire.RefusedError
		if errors.As(err, &refused) {
			t.Close()
			return nil, refused
		}
	}
	var up []send.Conn
	for i, c := range conns {
		if c != nil {
			up = append(up, c)
		} else {
			t.Dialer.Warn("stream %d: %v", i, errs[i])
		}
	}
	if len(up) == 0 {
		return nil, fmt.Errorf("no stream to %s: %w", t.Addr, errs[0])
	}
	return up, nil
}

// Redial implements transport.Transport: stream i, a new connection of
// the same job.
func (t *Transport) Redial(ctx context.Context, i int) (send.Conn, error) {
	return t.dial(ctx, i)
}

// Caps implements transport.Transport.
func (t *Transport) Caps() transport.Caps { return transport.Caps{Redial: true} }

func (t *Transport) dial(ctx context.Context, i int) (*send.Client, error) {
	c, err := dataplane.DialServe(ctx, t.Addr, t.TLS, dataplane.Greeting{Token: t.Token, Job: t.job, Index: i, Dest: t.Dest})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Addr, err)
	}
	conn, err := t.Dialer.Dial(ctx, fmt.Sprintf("%s stream %d", t.Addr, i), "serve "+t.Addr, c, c, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	t.opened.Add(conn)
	return conn, nil
}

// Close implements transport.Transport: it drops every stream it opened
// (those the pool closed already are not affected).
func (t *Transport) Close() error {
	t.opened.Abort()
	return nil
}
