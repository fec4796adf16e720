package ssh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/direct"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sync/errgroup"
)

// dialer is the job's Dialer, with each client told the SSH round trip
// (from which a path is far, and its streams start compressed).
func (t *Transport) dialer() *transport.Dialer {
	d := *t.cfg.Dialer
	configure := d.Configure
	d.Configure = func(c *send.Client) {
		if configure != nil {
			configure(c)
		}
		c.PathRTT = t.pathRTT
	}
	return &d
}

// dial runs stream name's handshake over r and rw.
func (t *Transport) dial(ctx context.Context, name string, r io.Reader, rw io.ReadWriteCloser) (*send.Client, error) {
	return t.dialer().Dial(ctx, name, "the agent on "+t.cfg.Target.Host, r, rw, rw)
}

// startData opens the job's k streams over the agent's data plane (TLS or
// TCP straight to the agent, see package direct). If none can be opened
// (a firewall) and the transport is auto, they go over SSH instead, each
// joining the hub's socket through a connection of its own.
func (t *Transport) startData(ctx context.Context, c sshx.Link, sess sshx.Proc, offer dataplane.Offer, k int) ([]send.Conn, error) {
	d := t.cfg.Dialer
	host := t.dataHost(c)
	dt := &direct.Transport{Host: host, Name: c.Host(), Offer: offer, Dialer: t.dialer(), DialConn: t.cfg.DialData}
	up, err := dt.Open(ctx, k)
	t.mu.Lock()
	t.hubSess = sess
	t.clients = make([]sshx.Link, k) // SSH connections for redial, opened when needed
	t.clients[0] = c
	t.mu.Unlock()
	if err == nil {
		return up, nil
	}
	if t.data != "auto" {
		return nil, fmt.Errorf("--transport %s: %w (--transport auto falls back to SSH)", t.data, err)
	}
	d.Warn("the data plane is not reachable (%v); the streams go over SSH", err)
	conns := make([]send.Conn, k)
	var g errgroup.Group
	for i := range k {
		g.Go(func() error {
			conn, err := t.Redial(ctx, i)
			if err != nil {
				d.Warn("stream %d: %v; going on without it", i, err)
				return nil
			}
			conns[i] = conn
			return nil
		})
	}
	g.Wait()
	up = slices.DeleteFunc(conns, func(c send.Conn) bool { return c == nil })
	if len(up) == 0 {
		return nil, fmt.Errorf("no stream could be opened, over the data plane (%v) or SSH", err)
	}
	return up, nil
}

// dataHost is where the agent's data plane is reached: the address
// --data-addr asked for, else the host SSH reached over c.
func (t *Transport) dataHost(c sshx.Link) string {
	if ip := net.ParseIP(strings.Trim(t.cfg.DataAddr, "[]")); ip != nil && !ip.IsUnspecified() {
		return ip.String() // the network asked for, maybe not SSH's
	}
	return c.HostName()
}

// Redial implements transport.Transport: stream i again, through its SSH
// connection if that still works, else a new one, to the agent hub if it
// still runs, else a new hub started there (which the other streams then
// join when they redial).
func (t *Transport) Redial(ctx context.Context, i int) (send.Conn, error) {
	t.mu.Lock()
	for len(t.clients) <= i {
		t.clients = append(t.clients, nil)
	}
	c := t.clients[i]
	t.mu.Unlock()
	if c != nil {
		conn, err := t.join(ctx, c, i)
		if err == nil || wire.IsRefused(err) {
			return conn, err
		}
		c.Close()
	}
	cs, _, err := t.links.DialN(ctx, 1)
	if err != nil {
		if sshx.IsPermanent(err) {
			return nil, send.Permanent(err)
		}
		return nil, err
	}
	c = cs[0]
	t.mu.Lock()
	t.clients[i] = c
	t.mu.Unlock()
	if conn, err := t.join(ctx, c, i); err == nil {
		return conn, nil
	}
	// The hub is gone (the agent was killed, or the host rebooted): start
	// a new one, unless another stream just did.
	t.restart.Lock()
	defer t.restart.Unlock()
	if conn, err := t.join(ctx, c, i); err == nil {
		return conn, nil
	}
	conns, _, err := t.start(ctx, []sshx.Link{c}, 1)
	if err != nil {
		return nil, err
	}
	conns[0].(*send.Client).Name = fmt.Sprintf("%s stream %d", c.Host(), i)
	return conns[0], nil
}

// join opens stream i to the hub over c.
func (t *Transport) join(ctx context.Context, c sshx.Link, i int) (send.Conn, error) {
	rw, fwd, err := t.joinHub(ctx, c)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s stream %d", c.Host(), i)
	if !fwd {
		t.cfg.Dialer.Trace("%s: no forwarding to the agent's socket (sshd refused it, or -e): relayed by `bulkmove --join`", name)
	}
	conn, err := t.dial(ctx, name, rw, rw)
	if err != nil {
		rw.Close()
		return nil, err
	}
	return conn, nil
}

// open opens the job's streams to the hub: the first on first (read
// through r), then one joining over each of the other clients.
func (t *Transport) open(ctx context.Context, clients []sshx.Link, r io.Reader, first io.ReadWriteCloser) (conns []send.Conn, err error) {
	d := t.cfg.Dialer
	host := clients[0].Host()
	conns = make([]send.Conn, len(clients))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range clients {
		g.Go(func() error {
			name := fmt.Sprintf("%s stream %d", c.Host(), i)
			rw, r := first, r
			if i > 0 {
				jc, fwd, err := t.joinHub(ctx, c) // ctx: it lives as long as the job
				if err != nil {
					if gctx.Err() == nil {
						d.Warn("%s: %v; going on without it", name, err)
					}
					return nil
				}
				if !fwd {
					d.Trace("%s: no forwarding to the agent's socket (sshd refused it, or -e): relayed by `bulkmove --join`", name)
				}
				rw, r = jc, jc
			}
			conn, err := t.dial(gctx, name, r, rw)
			if err != nil {
				rw.Close()
				if wire.IsRefused(err) {
					return err // the agent would refuse every stream of the job
				}
				if i > 0 && !errors.Is(err, wire.ErrVersion) {
					if gctx.Err() == nil {
						d.Warn("%v; going on without it", err)
					}
					return nil
				}
				return fmt.Errorf("%w (the agent on %s)", err, host)
			}
			conns[i] = conn
			d.Trace("%s ready", name)
			return nil
		})
	}
	err = g.Wait()
	if err != nil {
		for _, c := range conns {
			if c != nil {
				c.(*send.Client).Abort()
			}
		}
		first.Close()
		return nil, err
	}
	// The streams that opened, and their SSH connections at the same
	// indexes (for redial).
	var up []send.Conn
	t.mu.Lock()
	if len(clients) == len(t.clients) {
		var kept []sshx.Link
		for i, c := range conns {
			if c != nil {
				up = append(up, c)
				kept = append(kept, clients[i])
			} else {
				clients[i].Close()
			}
		}
		t.clients = kept
	} else {
		up = slices.DeleteFunc(conns, func(c send.Conn) bool { return c == nil })
	}
	t.mu.Unlock()
	return up, nil
}

// joinHub opens one more stream of the job to the hub over c: through
// sshd's forwarding to the hub's socket, else (sshd refuses to forward)
// relayed by `bulkmove --join SOCKET` run with this sender's own choice of
// the agent binary. The stream is the job's once the hub proved it holds
// the job's token (see wire.ProveToHub); before that nothing is sent on
// it.
func (t *Transport) joinHub(ctx context.Context, c sshx.Link) (rw io.ReadWriteCloser, forwarded bool, err error) {
	t.mu.Lock()
	sock, job := t.sock, t.job
	t.mu.Unlock()
	rw, ferr := c.Forward(ctx, sock)
	forwarded = ferr == nil
	if ferr != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		// Quiet: a relay that cannot reach the socket says so on stderr,
		// which the error then quotes; a working one says nothing.
		if rw, err = c.StartQuiet(ctx, t.command(wire.CmdJoin+" "+sshx.ShellQuote(sock))); err != nil {
			return nil, false, fmt.Errorf("%w (and %v)", err, ferr)
		}
	}
	br := bufio.NewReaderSize(rw, wire.HubMaxLine)
	timer := time.AfterFunc(BannerTimeout, func() { rw.Close() })
	err = wire.ProveToHub(rw, br, wire.HubJoin, job)
	if !timer.Stop() && err == nil {
		err = errors.New("timed out")
	}
	if err != nil {
		rw.Close()
		return nil, false, fmt.Errorf("the agent's socket %s on %s: %w", sock, c.Host(), err)
	}
	return bufferedConn{br, rw}, forwarded, nil
}

// bufferedConn reads through the bufio.Reader the handshake was read
// with, and writes and closes the connection.
type bufferedConn struct {
	*bufio.Reader
	io.WriteCloser
}
