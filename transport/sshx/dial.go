package sshx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/cpu"

	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// Client is one authenticated SSH connection (its own TCP connection, or its
// own channel through its own jump host connections).
type Client struct {
	ssh    *ssh.Client
	alias  string
	s      *settings
	stderr io.Writer
	hops   []*ssh.Client // jump host connections, outermost first
	proxy  io.Closer     // ProxyCommand
	notes  *notes

	closeOnce     sync.Once
	closeErr      error
	keepaliveDead atomic.Bool
	tcp           net.Conn // the TCP connection to the host, when direct
}

// PathRTT is the network round trip to the host as this host's kernel
// measures it on the connection (TCP_INFO's min_rtt, see kernelRTT): the
// TCP handshake alone gives it, and no process's scheduling adds to it.
// False through a jump host or a ProxyCommand, or off Linux.
func (c *Client) PathRTT() (time.Duration, bool) {
	if c.tcp == nil {
		return 0, false
	}
	return kernelRTT(c.tcp)
}

// SSH returns the underlying golang.org/x/crypto/ssh client.
func (c *Client) SSH() *ssh.Client { return c.ssh }

// Host returns the host as it was given to Dial (the alias).
func (c *Client) Host() string { return c.alias }

// HostName returns the host name actually connected to (after ssh_config's
// HostName), for example to open other connections to the same machine.
func (c *Client) HostName() string { return c.s.HostName }

// Endpoint names the account connected to, user@hostname:port, the same
// whatever alias or jump hosts led there.
func (c *Client) Endpoint() string {
	return fmt.Sprintf("%s@%s:%d", c.s.User, c.s.HostName, c.s.Port)
}

// Close closes the connection and those to its jump hosts.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		err := c.ssh.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			c.closeErr = err
		}
		for i := len(c.hops) - 1; i >= 0; i-- {
			c.hops[i].Close()
		}
		if c.proxy != nil {
			c.proxy.Close()
		}
	})
	return c.closeErr
}

// Dial connects and authenticates one SSH connection to t, the way OpenSSH's
// ssh would with the same ssh_config and flags. Errors start with
// "ssh HOST: ".
func Dial(ctx context.Context, t Target, o Options) (*Client, error) {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	return dial(ctx, t, o, newNotes(o.Stderr))
}

func dial(ctx context.Context, t Target, o Options, n *notes) (*Client, error) {
	if err := checkNames(t.Host, t.User); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	s, err := resolve(t.Host, t.User, t.Port, &o, n.warn)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", t.Host, err)
	}
	c, err := dialSettings(ctx, s, t.User, &o, n)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", t.Host, err)
	}
	return c, nil
}

// DialN opens n separate TCP+SSH connections to t in parallel, at most
// MaxParallelHandshakes handshakes at a time. It returns the connections that
// succeeded and, for each one that failed, its error (errs has one entry per
// failure). err is non-nil only if none succeeded, or if one failed for a
// reason that retrying cannot fix (IsPermanent: host key, authentication);
// then no connection is returned.
func DialN(ctx context.Context, t Target, o Options, n int) (clients []*Client, errs []error, err error) {
	if err := checkNames(t.Host, t.User); err != nil {
		err = fmt.Errorf("ssh: %w", err)
		return nil, []error{err}, err
	}
	d := startDials(ctx, t, o, n)
	d.wg.Wait()
	return d.result(0)
}

// DialFirst opens n connections to t as DialN does, and returns the first
// one up as soon as it is, while the others go on connecting: rest waits
// for them and returns them as DialN would (without first), with the
// errors of those that failed. err is non-nil when no connection came up,
// or one failed for a reason that retrying cannot fix; rest is then nil.
// A caller that gets first must call rest (or the others stay open).
//
// Over a long path a handshake takes several round trips, and the slowest
// of n decides when DialN returns: a job's first stream can start
// meanwhile.
func DialFirst(ctx context.Context, t Target, o Options, n int) (first *Client, rest func() ([]*Client, []error), err error) {
	if err := checkNames(t.Host, t.User); err != nil {
		return nil, nil, fmt.Errorf("ssh: %w", err)
	}
	d := startDials(ctx, t, o, n)
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	var i int
	select {
	case i = <-d.up:
	case <-done:
		select {
		case i = <-d.up:
		default:
			_, _, err = d.result(0)
			return nil, nil, err
		}
	}
	d.mu.Lock()
	first = d.got[i]
	d.got[i] = nil
	perm := d.permanent
	d.mu.Unlock()
	if perm != nil {
		first.Close()
		<-done
		_, _, err = d.result(0) // closes the others
		return nil, nil, err
	}
	return first, func() ([]*Client, []error) {
		<-done
		cs, errs, _ := d.result(1)
		return cs, errs
	}, nil
}

// dials are n handshakes under way (startDials).
type dials struct {
	n         int
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	up        chan int // the index of each connection up, as it comes
	mu        sync.Mutex
	got       []*Client
	failed    []error
	permanent error
}

// startDials starts n handshakes to t, at most MaxParallelHandshakes at a
// time; their results are d's once d.wg is done.
func startDials(ctx context.Context, t Target, o Options, n int) *dials {
	if n < 1 {
		n = 1
	}
	d := &dials{n: n, up: make(chan int, n), got: make([]*Client, n), failed: make([]error, n)}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	shared := newNotes(o.Stderr)
	ctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	sem := make(chan struct{}, MaxParallelHandshakes)
	for i := 0; i < n; i++ {
		d.wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				d.mu.Lock()
				d.failed[i] = ctx.Err()
				d.mu.Unlock()
				return
			}
			c, err := dial(ctx, t, o, shared)
			<-sem
			d.mu.Lock()
			defer d.mu.Unlock()
			if err != nil {
				d.failed[i] = err
				if IsPermanent(err) && d.permanent == nil {
					d.permanent = err
					cancel()
				}
				return
			}
			d.got[i] = c
			d.up <- i
		})
	}
	return d
}

// result is what the dials came to, once all ended, leaving out taken
// connections handed out already (as DialN returns it).
func (d *dials) result(taken int) (clients []*Client, errs []error, err error) {
	d.cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := 0; i < d.n; i++ {
		if d.got[i] != nil {
			clients = append(clients, d.got[i])
		} else if d.failed[i] != nil {
			errs = append(errs, fmt.Errorf("connection %d of %d: %w", i+1, d.n, d.failed[i]))
		}
	}
	if d.permanent != nil {
		for _, c := range clients {
			c.Close()
		}
		return nil, errs, d.permanent
	}
	if len(clients) == 0 && taken == 0 {
		for i := range d.failed {
			if d.failed[i] != nil && !errors.Is(d.failed[i], context.Canceled) {
				return nil, errs, d.failed[i]
			}
		}
		return nil, errs, d.failed[0]
	}
	return clients, errs, nil
}

// dialSettings connects to s through its jump hosts or ProxyCommand.
func dialSettings(ctx context.Context, s *settings, cmdUser string, o *Options, n *notes) (_ *Client, err error) {
	c := &Client{alias: s.Alias, s: s, stderr: o.Stderr, notes: n}
	warn := n.warn
	defer func() {
		if err != nil {
			for i := len(c.hops) - 1; i >= 0; i-- {
				c.hops[i].Close()
			}
			if c.proxy != nil {
				c.proxy.Close()
			}
		}
	}()
	addr := net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))
	var conn net.Conn
	switch {
	case s.ProxyJump != "":
		hops := strings.Split(s.ProxyJump, ",")
		if len(hops) > 16 {
			return nil, fmt.Errorf("ProxyJump %q: too many hops", s.ProxyJump)
		}
		var prev *ssh.Client
		for _, h := range hops {
			hu, hh, hp, err := parseJump(strings.TrimSpace(h))
			if err != nil {
				return nil, err
			}
			ho := *o
			ho.Port, ho.Jump = 0, "none"
			hs, err := resolve(hh, hu, hp, &ho, warn)
			if err != nil {
				return nil, fmt.Errorf("jump host %s: %w", hh, err)
			}
			hs.ProxyCommand = ""
			hopAddr := net.JoinHostPort(hs.HostName, strconv.Itoa(hs.Port))
			var hc net.Conn
			if prev == nil {
				hc, err = dialTCP(ctx, hopAddr, hs.ConnectTimeout)
			} else {
				hc, err = dialThrough(ctx, prev, hopAddr, hs.ConnectTimeout)
			}
			if err != nil {
				return nil, fmt.Errorf("jump host %s: %w", hh, err)
			}
			cl, err := handshake(ctx, hc, hs, o, n, hint(hs, hu, ""))
			if err != nil {
				return nil, fmt.Errorf("jump host %s: %w", hh, err)
			}
			c.hops = append(c.hops, cl)
			prev = cl
		}
		conn, err = dialThrough(ctx, prev, addr, s.ConnectTimeout)
		if err != nil {
			return nil, fmt.Errorf("through jump host %s: %w", hops[len(hops)-1], err)
		}
	case s.ProxyCommand != "":
		pc, err := startProxyCommand(s.ProxyCommand, o.Stderr)
		if err != nil {
			return nil, err
		}
		c.proxy = pc
		conn = pc
	default:
		conn, err = dialTCP(ctx, addr, s.ConnectTimeout)
		if err != nil {
			return nil, err
		}
		c.tcp = conn
	}
	c.ssh, err = handshake(ctx, conn, s, o, n, hint(s, cmdUser, o.Jump))
	if err != nil {
		return nil, err
	}
	if s.ServerAliveInterval > 0 {
		go c.keepalive(s.ServerAliveInterval, s.ServerAliveCountMax)
	}
	return c, nil
}

func dialTCP(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return withQuickAck(c), nil
}

func dialThrough(ctx context.Context, via *ssh.Client, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := via.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial tcp %s: %w", addr, err)
	}
	return conn, nil
}

// parseJump parses one ProxyJump hop: [user@]host[:port] or
// ssh://[user@]host[:port].
func parseJump(s string) (user, host string, port int, err error) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "ssh://"), "/")
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		user, s = s[:at], s[at+1:]
	}
	host = s
	ps := ""
	switch {
	case strings.HasPrefix(s, "["):
		if h, p, e := net.SplitHostPort(s); e == nil {
			host, ps = h, p
		} else {
			host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		}
	case strings.Count(s, ":") == 1:
		host, ps, _ = strings.Cut(s, ":")
	}
	if ps != "" {
		port, err = strconv.Atoi(ps)
		if err != nil || port <= 0 || port > 65535 {
			return "", "", 0, fmt.Errorf("jump host %q: bad port", s)
		}
	}
	if host == "" {
		return "", "", 0, fmt.Errorf("jump host %q: empty host name", s)
	}
	return user, host, port, nil
}

// hint is the ssh command line that would record s's host key.
func hint(s *settings, cmdUser, jump string) string {
	parts := []string{"ssh"}
	if s.ConfigFile != "" {
		parts = append(parts, "-F", ShellQuote(s.ConfigFile))
	}
	if jump != "" && jump != "none" {
		parts = append(parts, "-J", ShellQuote(jump))
	}
	if s.PortFromFlags {
		parts = append(parts, "-p", strconv.Itoa(s.Port))
	}
	h := s.Alias
	if cmdUser != "" {
		h = cmdUser + "@" + h
	}
	return strings.Join(append(parts, ShellQuote(h)), " ")
}

// handshake runs the SSH handshake and authentication over conn.
func handshake(ctx context.Context, conn net.Conn, s *settings, o *Options, n *notes, hintCmd string) (*ssh.Client, error) {
	warn := n.warn
	addr := net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))
	hk := &hostKeyChecker{s: s, lookup: knownHostsLookup(s), hint: hintCmd, warn: warn}
	db, err := hk.db()
	if err != nil {
		conn.Close()
		return nil, err
	}
	w := newWatchdog(s.ConnectTimeout, conn)
	stop := context.AfterFunc(ctx, w.cancel)
	auth := buildAuth(s, o, w, warn)
	defer auth.close()
	cfg := &ssh.ClientConfig{
		User:              s.User,
		Auth:              auth.methods,
		HostKeyCallback:   hk.callback(db),
		HostKeyAlgorithms: hk.algorithms(db),
		BannerCallback: func(msg string) error {
			if msg = strings.TrimRight(msg, "\r\n"); msg != "" {
				n.print(msg)
			}
			return nil
		},
		Config: ssh.Config{Ciphers: preferredCiphers()},
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	fired := w.finish()
	stop()
	if err != nil {
		conn.Close()
		var ke *kindError
		switch {
		case errors.As(err, &ke):
			return nil, ke
		case fired && ctx.Err() != nil:
			return nil, fmt.Errorf("handshake with %s: %w", addr, ctx.Err())
		case fired:
			return nil, fmt.Errorf("handshake with %s: timed out after %v", addr, s.ConnectTimeout)
		case isAuthFailure(err):
			return nil, authError(s, auth, err)
		}
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// preferredCiphers puts aes128-gcm first where the CPU has AES instructions
// (chacha20-poly1305 otherwise), then the library's defaults.
func preferredCiphers() []string {
	first := "chacha20-poly1305@openssh.com"
	if hasAESHardware() {
		first = "aes128-gcm@openssh.com"
	}
	out := []string{first}
	for _, c := range ssh.SupportedAlgorithms().Ciphers {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func hasAESHardware() bool {
	switch runtime.GOARCH {
	case "amd64", "386":
		return cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ
	case "arm64":
		return cpu.ARM64.HasAES && cpu.ARM64.HasPMULL
	case "s390x":
		return true
	case "ppc64le", "ppc64":
		return true
	}
	return false
}

// keepalive sends keepalive@openssh.com requests every interval and closes
// the connection after max intervals without an answer (ServerAliveInterval,
// ServerAliveCountMax).
func (c *Client) keepalive(interval time.Duration, max int) {
	done := make(chan struct{})
	go func() {
		_ = c.ssh.Wait()
		close(done)
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	replies := make(chan struct{}, 1)
	inflight := false
	missed := 0
	for {
		select {
		case <-done:
			return
		case <-replies:
			inflight, missed = false, 0
		case <-t.C:
			if inflight {
				missed++
				if missed >= max {
					c.keepaliveDead.Store(true)
					c.notes.print(fmt.Sprintf("ssh %s: no answer to keepalives for %v: closing the connection",
						c.alias, time.Duration(max)*interval))
					c.ssh.Close()
					return
				}
				continue
			}
			inflight = true
			go func() {
				if _, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil); err == nil {
					replies <- struct{}{}
				}
			}()
		}
	}
}

// watchdog closes the connection if the handshake takes longer than its
// timeout, not counting time spent at a terminal prompt, or when ctx ends.
type watchdog struct {
	mu    sync.Mutex
	d     time.Duration
	conn  net.Conn
	timer *time.Timer
	held  int
	done  bool
	fired bool
}

func newWatchdog(d time.Duration, conn net.Conn) *watchdog {
	w := &watchdog{d: d, conn: conn}
	w.timer = time.AfterFunc(d, w.expire)
	return w
}

func (w *watchdog) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.held > 0 {
		return
	}
	w.done, w.fired = true, true
	w.conn.Close()
}

func (w *watchdog) cancel() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.done, w.fired = true, true
	w.timer.Stop()
	w.conn.Close()
}

func (w *watchdog) hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held++
	w.timer.Stop()
}

func (w *watchdog) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held--
	if w.held == 0 && !w.done {
		w.timer.Reset(w.d)
	}
}

// finish ends the watch and reports whether it had closed the connection.
func (w *watchdog) finish() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return w.fired
	}
	w.done = true
	w.timer.Stop()
	return false
}

// cmdConn is a net.Conn over a ProxyCommand's stdin and stdout.
type cmdConn struct {
	cmd  *exec.Cmd
	r, w *os.File
	once sync.Once
}

func startProxyCommand(command string, stderr io.Writer) (*cmdConn, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("ProxyCommand %q: %w", command, err)
	}
	inR.Close()
	outW.Close()
	return &cmdConn{cmd: cmd, r: outR, w: inW}, nil
}

func (c *cmdConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *cmdConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *cmdConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		c.r.Close()
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	return nil
}
func (c *cmdConn) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *cmdConn) RemoteAddr() net.Addr { return pipeAddr{} }
func (c *cmdConn) SetDeadline(t time.Time) error {
	c.r.SetReadDeadline(t)
	return c.w.SetWriteDeadline(t)
}
func (c *cmdConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *cmdConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "proxycommand" }

// notes prints warnings and notices to Options.Stderr, each once per Dial
// or DialN (its K connections would otherwise repeat them).
type notes struct {
	w    io.Writer
	mu   sync.Mutex
	seen map[string]bool
}

func newNotes(w io.Writer) *notes { return &notes{w: w, seen: map[string]bool{}} }

func (n *notes) print(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[msg] {
		return
	}
	n.seen[msg] = true
	// A server's banner is the remote side's text: each of its lines is
	// escaped (termsafe.Sanitize) before it reaches the terminal.
	lines := strings.Split(strings.TrimRight(msg, "\r\n"), "\n")
	for i, l := range lines {
		lines[i] = termsafe.Sanitize(strings.TrimSuffix(l, "\r"))
	}
	stderrMu.Lock()
	fmt.Fprintln(n.w, strings.Join(lines, "\n"))
	stderrMu.Unlock()
}

func (n *notes) warn(msg string) { n.print("warning: " + msg) }
