// Package ssh is the transport of a push to [user@]host:DEST: it starts
// one `bulkmove --agent --hub K` on the remote host over SSH (transport/sshx
// opens the connections) and opens the job's K streams to it, over K
// separate TCP connections, each its own SSH channel window and cipher
// state; -j auto's first streams over a near path, channels of the first
// connection (Config.Share). The agent runs on the first connection; the other streams reach
// its Unix socket through sshd's forwarding (or, where sshd forbids that,
// a `bulkmove --join SOCKET` relay), each proving it holds the job's token
// as the agent proves it holds it too (wire's hub handshake).
//
// With a data plane (--transport tls, tcp or auto) SSH only starts the
// agent, which listens on a port of its own, and the streams go straight
// to it (transport/direct); a stream lost there comes back over SSH.
//
// The agent is started at once with agentbin.Command, without probing for
// it first (each probe costs round trips: on a 100 ms path, a second). Only
// if that finds no bulkmove, or one of another protocol, does
// sshx.Client.EnsureAgent look further (and upload this binary if it
// must), and the start is tried again. A push with --linger leaves the
// agent running for a while, and a later push to the same account opens
// its streams to it (internal/linger keeps where it is): no login shell,
// no new process.
//
// The transport redials a lost stream (over its SSH connection if that
// still works, else a new one; to the agent if it still runs, else to a
// new one), and adds streams for -j auto over connections of their own,
// opened ahead over a far path (Prepare).
//
// It is the sending side's; the agent it starts is receive/agentd.
package ssh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
	"github.com/bulkmove/bulkmove/wire"
)

// Config is a push's SSH transport: where, how to log in, and the agent
// it starts there.
type Config struct {
	Target  sshx.Target
	Options sshx.Options // how to log in (Stderr: where the remote's errors go)
	// OpenSSH, if set, is the system's OpenSSH client (-e): the links
	// are its processes, not the built-in client's connections.
	OpenSSH *sshx.OpenSSH
	Dialer  *transport.Dialer
	// Root is the receiver's root on the remote host ("": the home
	// directory).
	Root string
	// SrcIDs is the agent's --src-ids (SRC by device and inode, with this
	// machine), for it to refuse a ROOT that overlaps SRC; "" for none.
	SrcIDs string
	// Nice is the agent's --nice and --io-nice flags, each with a space
	// before it, shell-quoted; Allow is its receive policy, which
	// AllowFlags gives as its --allow-* flags, the same way.
	Nice, AllowFlags string
	Allow            wire.Allow
	// Data is --transport: "" or "ssh" for streams over SSH; "tls" or
	// "tcp" for the agent's data plane; "auto" for TLS, falling back to
	// SSH. DataAddr and DataPorts are --data-addr and --data-ports.
	Data, DataAddr, DataPorts string
	// Linger is --linger: how long the agent stays after the job (SSH
	// streams only).
	Linger time.Duration
	// RemoteBulkmove is --remote-bulkmove: the remote bulkmove's path
	// ("": the cached upload of this binary, else the remote PATH's).
	RemoteBulkmove string
	// DialData, if set, opens a data-plane stream in place of
	// dataplane.Dial (see direct.Transport.DialConn).
	DialData func(ctx context.Context, host string, o dataplane.Offer, i int) (net.Conn, error)
	// Fit, if set, is told the kernel's round trip of the first
	// connection (ok false: it cannot be read) as soon as it is open, and
	// returns how many streams the job opens (at most Open's k; SSH
	// streams only): -j auto's start.
	Fit func(rtt time.Duration, ok bool) int
	// Ahead, if set, is told the same round trip and returns how many
	// connections to open ahead for Add (SSH streams only): over a far
	// path, -j auto's first step.
	Ahead func(rtt time.Duration, ok bool) int
	// Share, if set, is told the same round trip and says whether the
	// streams Open leaves pending join over the first connection, each a
	// channel of its own, rather than over the connections dialed with it
	// (closed once up; SSH streams only): over a near path, -j auto's
	// start. One sshd process then carries them all, and it costs less
	// CPU than one per stream: on the rig's direct link, 100,000 files of
	// 1 KiB over 2 streams cost sshd a fifth less than over 2 connections.
	// The streams a step adds later come over connections of their own.
	Share func(rtt time.Duration, ok bool) bool
}

// Transport is the SSH transport of one push.
type Transport struct {
	cfg   Config
	links sshx.Linker // the built-in client's, or OpenSSH's
	data  string      // "tls", "tcp" or "auto" asks for a data plane; "": none
	cmd   string      // starts the agent hub
	// lingerAt is where the record of a lingering agent is kept; set
	// when this push asks one to linger
	lingerAt string

	mu      sync.Mutex
	clients []sshx.Link
	// agent is the remote bulkmove this sender chose (--remote-bulkmove, or
	// what EnsureAgent found), or "" for AgentCommand's choice of the
	// cached upload whose hash is sum: it starts the agent, and relays a
	// stream to its socket where sshd does not forward.
	agent, sum string
	sock, job  string // the hub's socket, and the job's token

	restart sync.Mutex // one stream at a time starts a new hub

	hubSess sshx.Proc // with a data plane: the agent's session, held open until the end

	rttOnce sync.Once
	rttVal  time.Duration // pathRTT's measure

	grow *growth // -j auto's added streams
	// pending is how many of the job's streams Open left to Add: they
	// join once their connections are up (see Pending).
	pending int

	// handOff: the agent's data plane is for another host's sender
	// (StartAgent), which handed describes once it is up.
	handOff bool
	handed  *Agent
	hubOut  *bufio.Reader // the agent's answers after its banner (AskDial)
}

// Agent is an agent started for a sender on another host (a move from
// one remote host to another): where its data plane listens (Host, an
// address; Name, the host as messages name it) and its offer.
type Agent struct {
	Host, Name string
	Offer      dataplane.Offer
}

// StartAgent starts the agent for k streams with its data plane (TLS
// unless Config.Data says tcp) and returns its offer, without opening a
// stream: a sender elsewhere opens them. The agent runs until Close.
func (t *Transport) StartAgent(ctx context.Context, k int) (Agent, error) {
	if t.data == "" || t.data == "auto" {
		t.data = "tls"
	}
	t.handOff = true
	if _, err := t.Open(ctx, k); err != nil {
		return Agent{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.handed == nil {
		t.closeLocked()
		return Agent{}, fmt.Errorf("ssh %s: the agent offered no data plane (an older bulkmove?)", t.cfg.Target.Host)
	}
	return *t.handed, nil
}

// DialTimeout bounds the wait for the agent's answer to AskDial: its
// dials' own timeouts (the connection's, then TLS's) and a margin. An
// agent that does not know the request (an older bulkmove) never answers.
var DialTimeout = 40 * time.Second

// AskDial asks the agent started by StartAgent to open its streams to a
// sender that listens at host per offer (the one direction open between
// the two hosts may be from the agent's): how many it opened (the first
// error after it, if not all), or why none did.
func (t *Transport) AskDial(ctx context.Context, host string, offer dataplane.Offer) (int, error) {
	t.mu.Lock()
	sess, br := t.hubSess, t.hubOut
	t.mu.Unlock()
	name := t.cfg.Target.Host
	if sess == nil || br == nil {
		return 0, fmt.Errorf("ssh %s: no agent to ask", name)
	}
	if _, err := fmt.Fprintf(sess, "%s%s %s\n", wire.AgentDial, host, offer); err != nil {
		return 0, fmt.Errorf("ssh %s: asking the agent to dial: %w", name, err)
	}
	line := make(chan string, 1)
	go func() {
		l, _ := br.ReadString('\n')
		line <- l
	}()
	timer := time.NewTimer(DialTimeout)
	defer timer.Stop()
	var l string
	select {
	case l = <-line:
	case <-timer.C:
		return 0, fmt.Errorf("ssh %s: the agent did not answer within %v (a bulkmove older than this one?)", name, DialTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	l = strings.TrimSpace(l)
	if why, ok := strings.CutPrefix(l, strings.TrimSpace(wire.Refused)); ok {
		return 0, errors.New(strings.TrimSpace(why))
	}
	rest, ok := strings.CutPrefix(l, strings.TrimSpace(wire.AgentDialed))
	num, why, _ := strings.Cut(strings.TrimSpace(rest), " ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 {
		if l == "" {
			return 0, fmt.Errorf("ssh %s: the agent ended without answering", name)
		}
		return 0, fmt.Errorf("ssh %s: the agent answered %q", name, l)
	}
	if why != "" {
		return n, errors.New(why)
	}
	return n, nil
}

// DialAgent opens a connection to the agent's data plane (StartAgent)
// from its own host, through sshd's forwarding: a relay's way in where
// the data port is not reachable from outside.
func (t *Transport) DialAgent(ctx context.Context) (net.Conn, error) {
	t.mu.Lock()
	var c sshx.Link
	if len(t.clients) > 0 {
		c = t.clients[0]
	}
	a := t.handed
	t.mu.Unlock()
	d, ok := c.(interface {
		DialRemote(ctx context.Context, addr string) (net.Conn, error)
	})
	if a == nil || !ok {
		return nil, fmt.Errorf("ssh %s: no agent to forward to: %w", t.cfg.Target.Host, transport.ErrUnsupported)
	}
	return d.DialRemote(ctx, net.JoinHostPort(a.Host, strconv.Itoa(a.Offer.Port)))
}

// New is the SSH transport of cfg.
func New(cfg Config) *Transport {
	t := &Transport{cfg: cfg, links: sshx.Builtin(cfg.Target, cfg.Options)}
	if cfg.OpenSSH != nil {
		t.links = cfg.OpenSSH
	}
	if d := cfg.Data; d != "" && d != "ssh" {
		t.data = d
	}
	return t
}

// Caps implements transport.Transport: a lost stream is opened again;
// streams are added over SSH, not over a data plane (it admits K).
func (t *Transport) Caps() transport.Caps {
	return transport.Caps{Redial: true, Add: t.data == ""}
}

// RTT implements transport.Transport: the SSH round trip, measured once,
// as the connections open (Open): -j auto and each stream's first batch
// wait for it. 0 with a data plane (whose streams take no window from
// SSH).
func (t *Transport) RTT() time.Duration {
	if t.data != "" {
		return 0
	}
	return t.pathRTT()
}

// Pending is how many of the k streams Open was asked for it did not
// open itself, their SSH connections still on their way: the caller adds
// them with Add (which waits for those connections) while the first
// streams already send. Over a long path each handshake takes several
// round trips; the job need not wait for the slowest.
func (t *Transport) Pending() int { return t.pending }

// Add implements transport.Transport.
func (t *Transport) Add(ctx context.Context, i int) (send.Conn, error) {
	if t.data != "" {
		return nil, fmt.Errorf("add a stream over the data plane: %w", transport.ErrUnsupported)
	}
	return t.growth().add(ctx, i)
}

// Prepare implements transport.Transport.
func (t *Transport) Prepare(ctx context.Context, n int) (done func()) {
	if t.data != "" {
		return func() {}
	}
	return t.growth().prepare(ctx, n)
}

// Open implements transport.Transport: k streams to one agent hub, over
// k connections opened at once (at most 8 handshakes at a time: see
// sshx.DialN), or, with a data plane, over one SSH connection and k
// direct ones. The job runs on the streams that opened, with a warning
// for the others.
func (t *Transport) Open(ctx context.Context, k int) ([]send.Conn, error) {
	d := t.cfg.Dialer
	n := k
	if t.data != "" {
		n = 1 // SSH only starts the agent; the streams go over the data plane
	}
	// This binary's hash (which upload of it the remote cache may hold)
	// is read while the connections open, not after.
	type binSum struct {
		sum string
		err error
	}
	sumc := make(chan binSum, 1)
	go func() {
		sum, err := agentbin.SelfSum()
		sumc <- binSum{sum, err}
	}()
	var clients []sshx.Link
	if t.data == "" && n > 1 {
		// SSH streams: the agent starts, and the first stream opens, over
		// the first connection up; the others join as they connect
		// (Pending), not after the slowest handshake.
		first, rest, err := t.links.DialFirst(ctx, n)
		if err != nil {
			return nil, err
		}
		d.Trace("first of %d SSH connections open", n)
		clients = []sshx.Link{first}
		if t.cfg.Share != nil && t.cfg.Share(first.PathRTT()) {
			d.Trace("the path is near: the other streams join as channels of the first SSH connection")
			t.growth().share(first, rest)
		} else {
			t.growth().late(ctx, n-1, func() []sshx.Link {
				cs, errs := rest()
				for _, e := range errs {
					d.Warn("%v; going on with %d of %d streams", e, 1+len(cs), k)
				}
				return cs
			})
		}
	} else {
		cs, errs, err := t.links.DialN(ctx, n)
		if err != nil {
			return nil, err
		}
		d.Trace("%d SSH connections open", len(cs))
		for _, e := range errs {
			if e != nil {
				d.Warn("%v; going on with %d of %d streams", e, len(cs), k)
			}
		}
		clients = cs
	}
	if t.cfg.Fit != nil {
		if f := t.cfg.Fit(clients[0].PathRTT()); f < k {
			if t.data == "" && len(clients) > f {
				for _, c := range clients[f:] {
					c.Close()
				}
				clients = clients[:f]
			}
			k = f
		}
	}
	if t.data == "" {
		t.pending = k - len(clients)
		t.growth().shareFor(t.pending)
	}
	t.clients = clients
	if t.data == "" && t.cfg.Ahead != nil {
		if more := t.cfg.Ahead(clients[0].PathRTT()); more > 0 {
			t.growth().prepare(ctx, n-1+more)
		}
	}
	// The round trip, measured now, while the agent starts and nothing
	// else is sent (see rtt).
	go t.pathRTT()
	root := t.cfg.Root
	if root == "" {
		root = "." // host: means the remote home directory
	}
	check := ""
	if t.cfg.SrcIDs != "" {
		check = " --src-ids " + sshx.ShellQuote(t.cfg.SrcIDs)
	}
	flags := t.cfg.Nice + t.cfg.AllowFlags
	args := fmt.Sprintf("%s%s%s --hub %d -- %s", wire.CmdAgent, check, flags, k, sshx.ShellQuote(root))
	if t.data != "" {
		mode := t.data
		if mode == "auto" {
			mode = "tls"
		}
		if t.cfg.DataAddr != "" {
			check += " --data-addr " + sshx.ShellQuote(t.cfg.DataAddr)
		}
		args = fmt.Sprintf("%s%s%s --hub %d --data %s --data-ports %s -- %s", wire.CmdAgent, check, flags, k, mode,
			sshx.ShellQuote(t.cfg.DataPorts), sshx.ShellQuote(root))
	}
	agent := t.cfg.RemoteBulkmove
	self, err := os.Executable()
	if err != nil {
		t.Close()
		return nil, err
	}
	binary := "path:" + agent
	if agent == "" {
		bs := <-sumc
		if bs.err != nil {
			t.Close()
			return nil, fmt.Errorf("reading this executable: %w", bs.err)
		}
		binary = bs.sum
	}
	if l := t.cfg.Linger; l > 0 {
		if t.data == "" {
			args = fmt.Sprintf("%s%s%s --hub %d --linger %s -- %s", wire.CmdAgent, check, flags, k, l, sshx.ShellQuote(root))
		} else {
			d.Warn("--linger is for SSH streams; ignored with --transport %s", t.data)
		}
	}
	// The command that starts an agent: now, or, if the streams go to a
	// lingering one, when a lost stream finds it gone (redial).
	t.agent, t.sum = agent, binary
	t.cmd = t.command(args)
	if t.data == "" {
		// An agent a push with --linger left there: no remote shell.
		if conns, ok := t.startLingering(ctx, clients, binary, root); ok {
			return conns, nil
		}
	}
	// At once, optimistically: the cached copy of this binary (or the one
	// named), one remote shell; only if that fails, the slower search
	// (and its clear error) below.
	{
		conns, banner, err := t.start(ctx, clients, k)
		if err == nil || ctx.Err() != nil || (banner && !isVersion(err)) || isJobRefused(err) {
			if err != nil {
				t.Close()
				return nil, err
			}
			return conns, nil
		}
		d.Trace("no usable agent at once (%v): looking further", err)
	}
	agent, err = clients[0].EnsureAgent(ctx, agent, d.Version, wire.Proto, self)
	if err != nil {
		t.Close()
		return nil, err
	}
	d.Trace("agent found: %s", agent)
	t.mu.Lock()
	t.agent = agent
	t.mu.Unlock()
	t.cmd = t.command(args)
	conns, _, err := t.start(ctx, clients, k)
	if err != nil {
		t.Close()
		return nil, err
	}
	return conns, nil
}

// Close implements transport.Transport: it ends the agent's session (the
// agent sees its input end) and closes the SSH connections.
func (t *Transport) Close() error {
	t.mu.Lock()
	g := t.grow
	t.mu.Unlock()
	if g != nil {
		g.closeSpares() // connections opened ahead and never taken
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLocked()
	return nil
}

// closeLocked is Close's, with t.mu held.
func (t *Transport) closeLocked() {
	if t.hubSess != nil {
		t.hubSess.Close()
	}
	for _, c := range t.clients {
		if c != nil {
			c.Close()
		}
	}
	t.hubSess, t.clients = nil, nil
	if t.cfg.OpenSSH != nil {
		t.cfg.OpenSSH.Close()
	}
}

// command is the remote command that runs this sender's agent binary
// with args (shell-quoted already).
func (t *Transport) command(args string) string {
	t.mu.Lock()
	agent, sum := t.agent, t.sum
	t.mu.Unlock()
	if agent == "" {
		return agentbin.Command(t.cfg.Dialer.Version, wire.Proto, sum, args)
	}
	return sshx.ShellQuote(agent) + " " + args
}

// pathRTT is the SSH round trip (rtt), measured once.
func (t *Transport) pathRTT() time.Duration {
	t.rttOnce.Do(func() { t.rttVal = t.rtt() })
	return t.rttVal
}

// rtt measures the SSH round trip: the least of rttSamples keepalives,
// one after the other, over the last of the job's connections (or one
// still to join), idle while the agent starts on the first. A keepalive waits behind what the
// connection carries, and behind a busy host's CPUs: one sent as a
// CPU-bound copy begins, or beside the agent's start over the same
// connection (sshd busy starting it), reads milliseconds over a link of
// microseconds, and -j auto would take a far path's first step on a near
// one. (The kernel's round trip, which no load inflates, does
// not see a path whose TCP ends at a proxy: the SSH round trip does.)
func (t *Transport) rtt() time.Duration {
	t.mu.Lock()
	var c sshx.Link
	for _, cl := range t.clients {
		if cl != nil {
			c = cl
		}
	}
	g := t.grow
	t.mu.Unlock()
	if g != nil {
		// The job's other connections, still coming when the first
		// stream opened (Pending): one of them is idle (the agent
		// starts on the first).
		if idle := g.idle(); idle != nil {
			c = idle
		}
	}
	if c == nil {
		return 0
	}
	var least time.Duration
	for k := range rttSamples + rttMoreSamples {
		if k >= rttSamples {
			// The first few all read far where the kernel saw a near
			// path: the sshd's host busy (starting the agent beside a
			// copy), or a proxy's delay. A busy host lets some through
			// sooner; a proxy does not: a few more, spaced out.
			kernel, ok := c.PathRTT()
			if !ok || least < rttNear || kernel*4 > least {
				break
			}
			time.Sleep(rttSpacing)
		}
		start := time.Now()
		if err := c.Keepalive(); err != nil {
			break
		}
		if d := time.Since(start); least == 0 || d < least {
			least = d
		}
	}
	return least
}

const (
	// rttSamples is how many keepalives rtt times; rttMoreSamples how
	// many more, rttSpacing apart, when those read at least rttNear and
	// four times the kernel's round trip.
	rttSamples     = 3
	rttMoreSamples = 5
	rttSpacing     = 5 * time.Millisecond
	rttNear        = time.Millisecond
)
