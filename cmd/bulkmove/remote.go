package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/sshx"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// sshFlags are the flags of the SSH transport, named as ssh(1) names them.
type sshFlags struct {
	port           int
	identities     stringList
	config         string
	jump           string
	acceptNew      bool
	passwordAuth   bool
	remoteBulkmove string
}

func (s *sshFlags) options(stderrIsTerminal bool) sshx.Options {
	return sshx.Options{
		Port: s.port, Identities: s.identities, ConfigFile: s.config, Jump: s.jump,
		AcceptNewHostKey: s.acceptNew, PasswordAuth: s.passwordAuth, Batch: !stderrIsTerminal,
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
// again.
func (j *job) connectSSH(ctx context.Context, t sshx.Target, p plan) ([]stream.Conn, func(), error) {
	opt := j.flags.ssh.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	clients, errs, err := sshx.DialN(ctx, t, opt, j.flags.jobs)
	if err != nil {
		return nil, nil, err
	}
	j.trace("%d SSH connections open", len(clients))
	for _, e := range errs {
		if e != nil {
			errorf(j.stderr, "warning: %v; going on with %d of %d streams", e, len(clients), j.flags.jobs)
		}
	}
	cleanup := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	root := p.dstRoot
	if root == "" {
		root = "." // host: means the remote home directory
	}
	args := fmt.Sprintf("agent --hub %d -- %s", len(clients), sshx.ShellQuote(root))
	var conns []stream.Conn
	agent := j.flags.ssh.remoteBulkmove
	self, err := os.Executable()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	if agent == "" {
		sum, err := sshx.BinarySum(self)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("reading this executable: %w", err)
		}
		var banner bool
		conns, banner, err = j.startAgents(ctx, clients, sshx.AgentCommand(version, sum, args), p)
		if err == nil || ctx.Err() != nil || (banner && !errors.Is(err, stream.ErrVersion)) {
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			return conns, cleanup, nil
		}
		j.trace("no usable agent at once (%v): looking further", err)
	}
	agent, err = clients[0].EnsureAgent(ctx, agent, version, wire.Proto, self)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	j.trace("agent found: %s", agent)
	conns, _, err = j.startAgents(ctx, clients, sshx.ShellQuote(agent)+" "+args, p)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return conns, cleanup, nil
}

// bannerTimeout bounds the wait for the agent hub's first line.
const bannerTimeout = 30 * time.Second

// startAgents starts the agent hub on clients[0] with cmd and opens a
// stream to it over every client. banner says whether the hub started.
func (j *job) startAgents(ctx context.Context, clients []*sshx.Client, cmd string, p plan) (conns []stream.Conn, banner bool, err error) {
	host := clients[0].Host()
	sess, err := clients[0].StartQuiet(ctx, cmd)
	if err != nil {
		return nil, false, err
	}
	br := bufio.NewReader(sess)
	// An agent that does not announce itself (not a bulkmove that knows
	// --hub, or one that hangs) must not hang the job.
	timer := time.AfterFunc(bannerTimeout, func() { sess.Close() })
	line, rerr := br.ReadString('\n')
	timer.Stop()
	if rerr != nil || !strings.HasPrefix(line, hubBanner) {
		sess.CloseWrite()
		werr := sess.Wait()
		sess.Close()
		if strings.TrimSpace(line) == sshx.NoAgent {
			return nil, false, fmt.Errorf("ssh %s: no bulkmove on the remote PATH", host)
		}
		return nil, false, fmt.Errorf("ssh %s: the agent did not start (it printed %q): %w", host, strings.TrimSpace(line), errors.Join(rerr, werr))
	}
	sess.ShowStderr()
	sock, exe, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, hubBanner)), " ")
	j.trace("agent %s ready on %s", exe, host)
	ro := j.receiveOptions()
	conns = make([]stream.Conn, len(clients))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range clients {
		g.Go(func() error {
			name := fmt.Sprintf("%s stream %d", c.Host(), i)
			var rw io.ReadWriteCloser = sess
			var r io.Reader = br
			if i > 0 {
				jc, fwd, err := c.Join(ctx, sock, exe) // ctx: it lives as long as the job
				if err != nil {
					if gctx.Err() == nil {
						errorf(j.stderr, "warning: %s: %v; going on without it", name, err)
					}
					return nil
				}
				if !fwd {
					j.trace("%s: sshd refused to forward to the agent's socket: relayed by `bulkmove join`", name)
				}
				rw, r = jc, jc
			}
			conn, err := stream.Dial(gctx, name, r, rw, rw, version, ro, p.src)
			if err != nil {
				rw.Close()
				if i > 0 && !errors.Is(err, stream.ErrVersion) {
					if gctx.Err() == nil {
						errorf(j.stderr, "warning: %v; going on without it", err)
					}
					return nil
				}
				return fmt.Errorf("%w (agent %s on %s)", err, exe, host)
			}
			conns[i] = conn
			j.trace("%s ready", name)
			return nil
		})
	}
	err = g.Wait()
	conns = slices.DeleteFunc(conns, func(c stream.Conn) bool { return c == nil })
	if err != nil {
		for _, c := range conns {
			c.(*stream.Client).Abort()
		}
		sess.Close()
		return nil, true, err
	}
	return conns, true, nil
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
