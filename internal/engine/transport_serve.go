package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// serveScheme starts a DEST that is a `bulkmove serve` daemon.
const serveScheme = "bulkmove://"

// ServeClient are the sender's flags for bulkmove:// destinations.
type ServeClient struct {
	TokenFile, Fingerprint, CA, Cert, Key string
}

// parseServe reads bulkmove://HOST:PORT/NAME/PATH; the target's Path is
// NAME/PATH, as the server resolves it.
func (j *job) parseServe(s string) (sshx.Target, bool, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Port() == "" || strings.Trim(u.Path, "/") == "" {
		return sshx.Target{}, true, fmt.Errorf("%q: want bulkmove://HOST:PORT/ROOT[/PATH]", s)
	}
	j.serveAddr = u.Host
	return sshx.Target{Host: u.Hostname(), Path: strings.Trim(u.Path, "/")}, true, nil
}

// serveDialing is how many streams a sender opens to serve at once.
const serveDialing = 16

// connectServe opens K TLS streams to a `bulkmove serve` daemon, one job.
func (j *job) connectServe(ctx context.Context, p plan) ([]send.Conn, func(), error) {
	f := j.flags.Serve
	host, _, _ := net.SplitHostPort(j.serveAddr)
	cfg, err := dataplane.ClientConfig(host, f.CA, f.Fingerprint, f.Cert, f.Key)
	if err != nil {
		return nil, nil, err
	}
	var token string
	if f.TokenFile != "" {
		if token, err = dataplane.ReadToken(f.TokenFile); err != nil {
			return nil, nil, err
		}
	}
	var id [12]byte
	rand.Read(id[:])
	job := hex.EncodeToString(id[:])
	dial := func(ctx context.Context, i int) (send.Conn, error) {
		c, err := dataplane.DialServe(ctx, j.serveAddr, cfg, dataplane.Greeting{Token: token, Job: job, Index: i, Dest: p.dstRoot})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", j.serveAddr, err)
		}
		conn, err := send.Dial(ctx, fmt.Sprintf("%s stream %d", j.serveAddr, i), c, c, c, Version, j.receiveOptions(), p.src)
		if err != nil {
			c.Close()
			return nil, wire.RefusedBy("serve "+j.serveAddr, err)
		}
		j.configure(conn)
		return conn, nil
	}
	j.redial = dial
	conns := make([]send.Conn, j.flags.Jobs)
	errs := make([]error, j.flags.Jobs)
	var wg sync.WaitGroup
	// At most serveDialing handshakes at once: below serve's limit per
	// address (--max-peer-handshakes), which closes more at once.
	sem := make(chan struct{}, serveDialing)
	for i := range conns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			conns[i], errs[i] = dial(ctx, i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		var refused *wire.RefusedError
		if errors.As(err, &refused) {
			// The server would refuse any stream of the job: the job
			// stops, with the reason once.
			for _, c := range conns {
				if c != nil {
					c.(*send.Client).Abort()
				}
			}
			return nil, nil, refused
		}
	}
	var up []send.Conn
	for i, c := range conns {
		if c != nil {
			up = append(up, c)
		} else {
			termsafe.Errorf(j.stderr, "warning: stream %d: %v", i, errs[i])
		}
	}
	if len(up) == 0 {
		return nil, nil, fmt.Errorf("no stream to %s: %w", j.serveAddr, errs[0])
	}
	return up, func() {
		for _, c := range up {
			c.(*send.Client).Abort()
		}
	}, nil
}
