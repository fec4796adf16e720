package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/linger"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// SSHConfig are the flags of the SSH transport, named as ssh(1) names them.
type SSHConfig struct {
	Port           int
	Identities     StringList
	Config         string
	Jump           string
	AcceptNew      bool
	PasswordAuth   bool
	RemoteBulkmove string
	Linger         time.Duration
}

func (s *SSHConfig) options(stderrIsTerminal bool) sshx.Options {
	return sshx.Options{
		Port: s.Port, Identities: s.Identities, ConfigFile: s.Config, Jump: s.Jump,
		AcceptNewHostKey: s.AcceptNew, PasswordAuth: s.PasswordAuth, Batch: !stderrIsTerminal,
	}
}

// connectSSH opens K streams to one `bulkmove agent --hub K` on the remote
// host, over K separate TCP connections (each its own 2 MiB channel window
// and cipher state), at most 8 handshakes at once. The agent runs on the
// first connection; the others reach its Unix socket through sshd's
// forwarding (no login shell, no process each). The job runs on the
// connections that opened, with a warning for the others.
//
// The agent is started at once with AgentCommand, without probing for it
// first (each probe costs round trips: on a 100 ms path, a second). Only if
// that finds no bulkmove, or one of another protocol, does EnsureAgent
// look further (and upload this binary if it must), and the start is tried
// again. The link it returns can open a lost stream again (redial).
func (j *job) connectSSH(ctx context.Context, t sshx.Target, p plan) ([]send.Conn, *sshLink, error) {
	l := &sshLink{j: j, t: t, p: p, opt: j.flags.SSH.options(isTerminal(os.Stdin))}
	l.opt.Stderr = j.stderr
	n := j.flags.Jobs
	if tr := j.flags.Transport; tr != "" && tr != "ssh" {
		l.data = tr
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
		self, err := os.Executable()
		if err == nil {
			var sum string
			sum, err = sshx.BinarySum(self)
			sumc <- binSum{sum, err}
			return
		}
		sumc <- binSum{"", err}
	}()
	clients, errs, err := sshx.DialN(ctx, t, l.opt, n)
	if err != nil {
		return nil, nil, err
	}
	j.trace("%d SSH connections open", len(clients))
	for _, e := range errs {
		if e != nil {
			termsafe.Errorf(j.stderr, "warning: %v; going on with %d of %d streams", e, len(clients), j.flags.Jobs)
		}
	}
	if k := j.nearStart(clients[0]); k < j.flags.Jobs {
		if l.data == "" && len(clients) > k {
			for _, c := range clients[k:] {
				c.Close()
			}
			clients = clients[:k]
		}
		j.flags.Jobs = k
	}
	l.clients = clients
	j.farAhead(ctx, l, clients[0])
	// The round trip, measured now, while the agent starts and nothing
	// else is sent (see rtt).
	go l.pathRTT()
	root := p.dstRoot
	if root == "" {
		root = "." // host: means the remote home directory
	}
	srcIDs := j.srcIDs(p)
	check := ""
	if srcIDs != "" {
		check = " --src-ids " + sshx.ShellQuote(srcIDs)
	}
	args := fmt.Sprintf("agent%s%s%s --hub %d -- %s", check, j.flags.Gentle.NiceFlags.Text(), j.allowed().Text(), len(clients), sshx.ShellQuote(root))
	if l.data != "" {
		mode := l.data
		if mode == "auto" {
			mode = "tls"
		}
		if j.flags.DataAddr != "" {
			check += " --data-addr " + sshx.ShellQuote(j.flags.DataAddr)
		}
		args = fmt.Sprintf("agent%s%s%s --hub %d --data %s --data-ports %s -- %s", check, j.flags.Gentle.NiceFlags.Text(), j.allowed().Text(), j.flags.Jobs, mode,
			sshx.ShellQuote(j.flags.DataPorts), sshx.ShellQuote(root))
	}
	var conns []send.Conn
	agent := j.flags.SSH.RemoteBulkmove
	self, err := os.Executable()
	if err != nil {
		l.close()
		return nil, nil, err
	}
	binary := "path:" + agent
	if agent == "" {
		bs := <-sumc
		if bs.err != nil {
			l.close()
			return nil, nil, fmt.Errorf("reading this executable: %w", bs.err)
		}
		binary = bs.sum
	}
	if d := j.flags.SSH.Linger; d > 0 {
		if l.data == "" {
			args = fmt.Sprintf("agent%s%s%s --hub %d --linger %s -- %s", check, j.flags.Gentle.NiceFlags.Text(), j.allowed().Text(), len(clients), d, sshx.ShellQuote(root))
		} else {
			termsafe.Errorf(j.stderr, "warning: --linger is for SSH streams; ignored with --transport %s", l.data)
		}
	}
	// The command that starts an agent: now, or, if the streams go to a
	// lingering one, when a lost stream finds it gone (redial).
	l.agent, l.sum = agent, binary
	l.cmd = l.command(args)
	if l.data == "" {
		// An agent a push with --linger left there: no remote shell.
		if conns, ok := l.startLingering(ctx, clients, binary, root, srcIDs); ok {
			return conns, l, nil
		}
	}
	// At once, optimistically: the cached copy of this binary (or the one
	// named), one remote shell; only if that fails, the slower search
	// (and its clear error) below.
	{
		var banner bool
		conns, banner, err = l.start(ctx, clients)
		var refused *refusal
		if err == nil || ctx.Err() != nil || (banner && !errors.Is(err, wire.ErrVersion)) || errors.As(err, &refused) {
			if err != nil {
				l.close()
				return nil, nil, err
			}
			return conns, l, nil
		}
		j.trace("no usable agent at once (%v): looking further", err)
	}
	agent, err = clients[0].EnsureAgent(ctx, agent, Version, wire.Proto, self)
	if err != nil {
		l.close()
		return nil, nil, err
	}
	j.trace("agent found: %s", agent)
	l.mu.Lock()
	l.agent = agent
	l.mu.Unlock()
	l.cmd = l.command(args)
	conns, _, err = l.start(ctx, clients)
	if err != nil {
		l.close()
		return nil, nil, err
	}
	return conns, l, nil
}

// sshLink is the SSH side of a push: the connections, and the agent hub
// they reach.
type sshLink struct {
	j   *job
	t   sshx.Target
	p   plan
	opt sshx.Options
	cmd string // starts the agent hub
	// lingerAt is where the record of a lingering agent is kept; set
	// when this push asks one to linger
	lingerAt string

	mu      sync.Mutex
	clients []*sshx.Client
	// agent is the remote bulkmove this sender chose (--remote-bulkmove, or
	// what EnsureAgent found), or "" for AgentCommand's choice of the
	// cached upload whose hash is sum: it starts the agent, and relays a
	// stream to its socket where sshd does not forward.
	agent, sum string
	sock, job  string // the hub's socket, and the job's token

	restart sync.Mutex // one stream at a time starts a new hub

	data    string        // --transport: tls, tcp or auto asks for a data plane; "" or ssh: none
	hubSess *sshx.Session // with a data plane: the agent's session, held open until the end

	rttOnce sync.Once
	rttVal  time.Duration // pathRTT's measure

	grow *sshGrowth // -j auto's added streams (growth)
}

// command is the remote command that runs this sender's agent binary
// with args (shell-quoted already).
func (l *sshLink) command(args string) string {
	l.mu.Lock()
	agent, sum := l.agent, l.sum
	l.mu.Unlock()
	if agent == "" {
		return sshx.AgentCommand(Version, wire.Proto, sum, args)
	}
	return sshx.ShellQuote(agent) + " " + args
}

// pathRTT is the SSH round trip (rtt), measured once, as the connections
// open (connectSSH): -j auto and each stream's first batch wait for it.
func (l *sshLink) pathRTT() time.Duration {
	l.rttOnce.Do(func() { l.rttVal = l.rtt() })
	return l.rttVal
}

// startData opens the job's K streams over the agent's data plane (TLS or
// TCP straight to the agent, see package dataplane). If none can be
// opened (a firewall) and the transport is auto, they go over SSH
// instead, each joining the hub's socket through a connection of its own.
func (l *sshLink) startData(ctx context.Context, c *sshx.Client, sess *sshx.Session, offer dataplane.Offer) ([]send.Conn, error) {
	j := l.j
	k := j.flags.Jobs
	host := c.HostName()
	if ip := net.ParseIP(strings.Trim(j.flags.DataAddr, "[]")); ip != nil && !ip.IsUnspecified() {
		host = ip.String() // the network asked for, maybe not SSH's
	}
	conns := make([]send.Conn, k)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			name := fmt.Sprintf("%s stream %d (%s)", c.Host(), i, offer.Mode)
			nc, err := dataplane.Dial(ctx, host, offer, i)
			if err == nil {
				var conn *send.Client
				if conn, err = l.dial(ctx, name, nc, nc); err == nil {
					conns[i] = conn
					j.trace("%s ready", name)
					return
				}
				nc.Close()
			}
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", name, err)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	l.mu.Lock()
	l.hubSess = sess
	l.clients = make([]*sshx.Client, k) // SSH connections for redial, opened when needed
	l.clients[0] = c
	l.mu.Unlock()
	up := slices.DeleteFunc(slices.Clone(conns), func(c send.Conn) bool { return c == nil })
	if len(up) > 0 {
		if firstErr != nil {
			termsafe.Errorf(j.stderr, "warning: %v; going on with %d of %d streams", firstErr, len(up), k)
		}
		return up, nil
	}
	if l.data != "auto" {
		return nil, fmt.Errorf("--transport %s: %w (--transport auto falls back to SSH)", l.data, firstErr)
	}
	termsafe.Errorf(j.stderr, "warning: the data plane is not reachable (%v); the streams go over SSH", firstErr)
	var g errgroup.Group
	for i := range k {
		g.Go(func() error {
			conn, err := l.redial(ctx, i)
			if err != nil {
				termsafe.Errorf(j.stderr, "warning: stream %d: %v; going on without it", i, err)
				return nil
			}
			conns[i] = conn
			return nil
		})
	}
	g.Wait()
	up = slices.DeleteFunc(conns, func(c send.Conn) bool { return c == nil })
	if len(up) == 0 {
		return nil, fmt.Errorf("no stream could be opened, over the data plane (%v) or SSH", firstErr)
	}
	return up, nil
}

func (l *sshLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hubSess != nil {
		l.hubSess.Close() // the agent sees its stdin end
	}
	for _, c := range l.clients {
		if c != nil {
			c.Close()
		}
	}
}

// redial opens stream i again: through its SSH connection if that still
// works, else a new one, to the agent hub if it still runs, else a new hub
// started there (which the other streams then join when they redial).
func (l *sshLink) redial(ctx context.Context, i int) (send.Conn, error) {
	l.mu.Lock()
	c := l.clients[i]
	l.mu.Unlock()
	if c != nil {
		conn, err := l.join(ctx, c, i)
		if err == nil || wire.IsRefused(err) {
			return conn, err
		}
		c.Close()
	}
	cs, _, err := sshx.DialN(ctx, l.t, l.opt, 1)
	if err != nil {
		if sshx.IsPermanent(err) {
			return nil, send.Permanent(err)
		}
		return nil, err
	}
	c = cs[0]
	l.mu.Lock()
	l.clients[i] = c
	l.mu.Unlock()
	if conn, err := l.join(ctx, c, i); err == nil {
		return conn, nil
	}
	// The hub is gone (the agent was killed, or the host rebooted): start
	// a new one, unless another stream just did.
	l.restart.Lock()
	defer l.restart.Unlock()
	if conn, err := l.join(ctx, c, i); err == nil {
		return conn, nil
	}
	conns, _, err := l.start(ctx, []*sshx.Client{c})
	if err != nil {
		return nil, err
	}
	conns[0].(*send.Client).Name = fmt.Sprintf("%s stream %d", c.Host(), i)
	return conns[0], nil
}

// join opens stream i to the hub over c.
func (l *sshLink) join(ctx context.Context, c *sshx.Client, i int) (send.Conn, error) {
	rw, fwd, err := l.joinHub(ctx, c)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s stream %d", c.Host(), i)
	if !fwd {
		l.j.trace("%s: sshd refused to forward to the agent's socket: relayed by `bulkmove join`", name)
	}
	conn, err := l.dial(ctx, name, rw, rw)
	if err != nil {
		rw.Close()
		return nil, err
	}
	return conn, nil
}

func (l *sshLink) dial(ctx context.Context, name string, r io.Reader, rw io.ReadWriteCloser) (*send.Client, error) {
	conn, err := send.Dial(ctx, name, r, rw, rw, Version, l.j.receiveOptions(), l.p.src)
	if err != nil {
		return nil, wire.RefusedBy("the agent on "+l.t.Host, err)
	}
	l.j.configure(conn)
	conn.PathRTT = l.pathRTT
	return conn, nil
}

// readBanner reads the agent hub's banner line, or the NoAgent line,
// skipping what a login script may print before (up to 64 lines or 16
// KiB, returned as junk).
func readBanner(br *bufio.Reader) (line, junk string, err error) {
	var skipped strings.Builder
	for range 64 {
		line, err = br.ReadString('\n')
		if err != nil || strings.HasPrefix(line, wire.AgentBanner) || strings.HasPrefix(line, wire.SenderBanner) || strings.HasPrefix(line, wire.Refused) || strings.TrimSpace(line) == sshx.NoAgent {
			return line, strings.TrimSpace(skipped.String()), err
		}
		if skipped.Len()+len(line) > 16<<10 {
			break
		}
		skipped.WriteString(line)
	}
	return "", strings.TrimSpace(skipped.String()), errors.New("no agent banner among the first lines it printed")
}

// bannerTimeout bounds the wait for the agent hub's first line.
const bannerTimeout = 30 * time.Second

// start starts the agent hub on clients[0] and opens a stream to it over
// every client. banner says whether the hub started.
func (l *sshLink) start(ctx context.Context, clients []*sshx.Client) (conns []send.Conn, banner bool, err error) {
	j := l.j
	host := clients[0].Host()
	sess, err := clients[0].StartQuiet(ctx, l.cmd)
	if err != nil {
		return nil, false, err
	}
	br := bufio.NewReader(sess)
	// An agent that does not announce itself (not a bulkmove that knows
	// --hub, or one that hangs) must not hang the job.
	timer := time.AfterFunc(bannerTimeout, func() { sess.Close() })
	line, junk, rerr := readBanner(br)
	timer.Stop()
	if junk != "" {
		termsafe.Errorf(j.stderr, "warning: ssh %s: the remote shell printed %q before the agent started (a login script writing to stdout?); ignored", host, junk)
	}
	if rerr == nil && strings.HasPrefix(line, wire.SenderBanner) {
		// An older agent (PATH's): its socket takes a token from whoever
		// asks. EnsureAgent finds one of this protocol.
		sess.Close()
		return nil, true, fmt.Errorf("ssh %s: the agent there is an older bulkmove: %w", host, wire.ErrVersion)
	}
	if rerr != nil || !strings.HasPrefix(line, wire.AgentBanner) {
		sess.CloseWrite()
		werr := sess.Wait()
		sess.Close()
		if why, ok := strings.CutPrefix(line, wire.Refused); ok {
			return nil, false, &refusal{host: "ssh " + host, why: strings.TrimSpace(why)}
		}
		if strings.TrimSpace(line) == sshx.NoAgent {
			return nil, false, fmt.Errorf("ssh %s: no bulkmove on the remote PATH", host)
		}
		return nil, false, fmt.Errorf("ssh %s: the agent did not start (it printed %q): %w", host, strings.TrimSpace(junk+line), errors.Join(rerr, werr))
	}
	sess.ShowStderr()
	b, err := l.banner(host, line)
	if err != nil {
		sess.Close()
		return nil, true, err
	}
	if b.Linger != "" && l.lingerAt != "" {
		if err := linger.Save(l.lingerAt, linger.Record{Sock: b.Sock, Token: b.Linger}); err != nil {
			termsafe.Errorf(j.stderr, "warning: %v; the next push will start a new agent", err)
		}
	}
	if b.Offer != "" && l.data != "" {
		offer, err := dataplane.ParseOffer(b.Offer)
		if err != nil {
			sess.Close()
			return nil, true, fmt.Errorf("ssh %s: %w", host, err)
		}
		conns, err := l.startData(ctx, clients[0], sess, offer)
		return conns, true, err
	}
	conns, err = l.open(ctx, clients, br, sess)
	return conns, true, err
}

// banner parses the hub's banner line and notes where its streams join.
func (l *sshLink) banner(host, line string) (wire.AgentBannerFields, error) {
	b, err := wire.ParseAgentBanner(line)
	if err != nil {
		return b, fmt.Errorf("ssh %s: %w", host, err)
	}
	l.mu.Lock()
	l.sock, l.job = b.Sock, b.Job
	l.mu.Unlock()
	l.mu.Lock()
	agent := l.agent
	l.mu.Unlock()
	if agent == "" {
		agent = "bulkmove" // AgentCommand's: the remote PATH's, or the cached upload
	}
	l.j.trace("agent %s ready on %s", agent, host)
	return b, nil
}

// startLingering opens the job's streams to an agent a push with --linger
// left on the host, if this host has its record and it still answers: a new
// job on its socket, over clients[0]'s forwarding, then the other streams
// join it. ok is false if that cannot be done (the agent has ended, the
// host rebooted, sshd forbids forwarding, or whatever listens there does
// not prove it holds the record's token): the caller starts an agent as
// usual. Nothing is sent to the socket before it proved itself (see
// wire.ProveToHub). The job gets the agent's next token, saved in place of the
// one used, which works no more. With --linger the agent stays again after
// this job, without it this job is its last.
func (l *sshLink) startLingering(ctx context.Context, clients []*sshx.Client, binary, root, srcIDs string) (conns []send.Conn, ok bool) {
	j := l.j
	at, err := linger.Path(clients[0].Endpoint(), binary)
	if err != nil {
		return nil, false
	}
	if j.flags.SSH.Linger > 0 {
		l.lingerAt = at
	}
	// One push at a time uses the record: the token it holds works once.
	unlock, err := linger.Lock(at)
	if err != nil {
		j.trace("%v", err)
		return nil, false
	}
	defer func() { unlock() }() // unlock is a no-op once called
	rec := linger.Load(at)
	if rec == nil {
		return nil, false
	}
	host := clients[0].Host()
	fail := func(why error) ([]send.Conn, bool) {
		j.trace("no lingering agent on %s (%v): starting one", host, why)
		os.Remove(at)
		return nil, false
	}
	rw, err := clients[0].Forward(ctx, rec.Sock)
	if err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(rw, wire.HubMaxLine)
	timer := time.AfterFunc(bannerTimeout, func() { rw.Close() })
	line, err := "", wire.ProveToHub(rw, br, wire.HubNew, rec.Token)
	if err == nil {
		req, _ := json.Marshal(wire.NewJob{Root: root, Linger: j.flags.SSH.Linger, Nice: j.flags.Gentle.NiceFlags.Text(), SrcIDs: srcIDs, Allow: wire.Allow(j.allowed())})
		if _, err = fmt.Fprintf(rw, "%s\n", req); err == nil {
			line, err = wire.ReadHubLine(br)
		}
	}
	timer.Stop()
	if err == nil && !strings.HasPrefix(line, wire.AgentBanner) {
		err = fmt.Errorf("%q", line)
	}
	var b wire.AgentBannerFields
	if err == nil {
		b, err = l.banner(host, line)
	}
	if err == nil && b.Linger == "" {
		err = errors.New("no next linger token in its banner")
	}
	if err != nil {
		rw.Close()
		return fail(fmt.Errorf("%s: %w", rec.Sock, err))
	}
	j.trace("joined the agent lingering on %s", host)
	if j.flags.SSH.Linger > 0 {
		if err := linger.Save(at, linger.Record{Sock: rec.Sock, Token: b.Linger}); err != nil {
			termsafe.Errorf(j.stderr, "warning: %v; the next push will start a new agent", err)
		}
	} else {
		os.Remove(at) // it ends with this job
	}
	unlock() // the next push may go on: the record holds the next token
	conns, err = l.open(ctx, clients, br, rw)
	if err != nil {
		j.trace("the agent lingering on %s: %v: starting one", host, err)
		return nil, false
	}
	return conns, true
}

// open opens the job's streams to the hub: the first on first (read
// through r), then one joining over each of the other clients.
func (l *sshLink) open(ctx context.Context, clients []*sshx.Client, r io.Reader, first io.ReadWriteCloser) (conns []send.Conn, err error) {
	j := l.j
	host := clients[0].Host()
	conns = make([]send.Conn, len(clients))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range clients {
		g.Go(func() error {
			name := fmt.Sprintf("%s stream %d", c.Host(), i)
			rw, r := first, r
			if i > 0 {
				jc, fwd, err := l.joinHub(ctx, c) // ctx: it lives as long as the job
				if err != nil {
					if gctx.Err() == nil {
						termsafe.Errorf(j.stderr, "warning: %s: %v; going on without it", name, err)
					}
					return nil
				}
				if !fwd {
					j.trace("%s: sshd refused to forward to the agent's socket: relayed by `bulkmove join`", name)
				}
				rw, r = jc, jc
			}
			conn, err := l.dial(gctx, name, r, rw)
			if err != nil {
				rw.Close()
				if wire.IsRefused(err) {
					return err // the agent would refuse every stream of the job
				}
				if i > 0 && !errors.Is(err, wire.ErrVersion) {
					if gctx.Err() == nil {
						termsafe.Errorf(j.stderr, "warning: %v; going on without it", err)
					}
					return nil
				}
				return fmt.Errorf("%w (the agent on %s)", err, host)
			}
			conns[i] = conn
			j.trace("%s ready", name)
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
	l.mu.Lock()
	if len(clients) == len(l.clients) {
		var kept []*sshx.Client
		for i, c := range conns {
			if c != nil {
				up = append(up, c)
				kept = append(kept, clients[i])
			} else {
				clients[i].Close()
			}
		}
		l.clients = kept
	} else {
		up = slices.DeleteFunc(conns, func(c send.Conn) bool { return c == nil })
	}
	l.mu.Unlock()
	return up, nil
}

// joinHub opens one more stream of the job to the hub over c: through
// sshd's forwarding to the hub's socket, else (sshd refuses to forward)
// relayed by `bulkmove join SOCKET` run with this sender's own choice of
// the agent binary. The stream is the job's once the hub proved it holds
// the job's token (see wire.ProveToHub); before that nothing is sent on it.
func (l *sshLink) joinHub(ctx context.Context, c *sshx.Client) (rw io.ReadWriteCloser, forwarded bool, err error) {
	l.mu.Lock()
	sock, job := l.sock, l.job
	l.mu.Unlock()
	rw, ferr := c.Forward(ctx, sock)
	forwarded = ferr == nil
	if ferr != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		// Quiet: a relay that cannot reach the socket says so on stderr,
		// which the error then quotes; a working one says nothing.
		if rw, err = c.StartQuiet(ctx, l.command("join "+sshx.ShellQuote(sock))); err != nil {
			return nil, false, fmt.Errorf("%w (and %v)", err, ferr)
		}
	}
	br := bufio.NewReaderSize(rw, wire.HubMaxLine)
	timer := time.AfterFunc(bannerTimeout, func() { rw.Close() })
	err = wire.ProveToHub(rw, br, wire.HubJoin, job)
	if !timer.Stop() && err == nil {
		err = errors.New("timed out")
	}
	if err != nil {
		rw.Close()
		return nil, false, fmt.Errorf("the agent's socket %s on %s: %w", sock, c.Host(), err)
	}
	return bufferedConn{Reader: br, WriteCloser: rw}, forwarded, nil
}

// srcIDs is the --src-ids an agent is started with: SRC by device and
// inode, and this machine, for the agent to refuse a ROOT that overlaps
// it on the same machine. "" if this machine has no machine-id.
func (j *job) srcIDs(p plan) string {
	h := HostPlace{Machine: HostID()}
	if h.Machine == "" || p.srcReal == "" {
		return ""
	}
	pl, err := PlaceOf(j.src, p.srcReal)
	if err != nil {
		return ""
	}
	h.Place = pl
	if p.src.File != "" {
		h.As = p.rename
	}
	return h.Encode()
}

// remoteDest fills the plan for a remote DEST: the receiver's root is the
// remote path; a single-file SRC goes into it if it is a directory there.
func (j *job) remoteDest(ctx context.Context, t sshx.Target, p *plan) {
	p.dstRoot = t.Path
	if p.rename == "" {
		return
	}
	// A single file: into DEST if DEST ends in '/' (a directory),
	// else as DEST.
	if t.Path == "" || strings.HasSuffix(t.Path, "/") {
		p.dstRoot = t.Path
		return
	}
	p.dstRoot, p.rename = path.Dir(t.Path), path.Base(t.Path)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// bufferedConn reads through the bufio.Reader the handshake was read
// with, and writes and closes the connection.
type bufferedConn struct {
	*bufio.Reader
	io.WriteCloser
}
