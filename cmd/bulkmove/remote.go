package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

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

// connectSSH opens K streams to `bulkmove agent` on the remote host: K
// separate TCP connections (each its own 2 MiB channel window and cipher
// state), at most 8 handshakes at once. The job runs on the connections
// that opened, with a warning for the others.
func (j *job) connectSSH(ctx context.Context, t sshx.Target, p plan) ([]stream.Conn, func(), error) {
	opt := j.flags.ssh.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	clients, errs, err := sshx.DialN(ctx, t, opt, j.flags.jobs)
	if err != nil {
		return nil, nil, err
	}
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
	self, err := os.Executable()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	agent, err := clients[0].EnsureAgent(ctx, j.flags.ssh.remoteBulkmove, version, wire.Proto, self)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	root := p.dstRoot
	if root == "" {
		root = "." // host: means the remote home directory
	}
	cmd := sshx.ShellQuote(agent) + " agent " + sshx.ShellQuote(root)
	ro := j.receiveOptions()
	// Start the agents and their handshakes on all connections at once: on
	// a long path each costs a few round trips.
	conns := make([]stream.Conn, len(clients))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range clients {
		g.Go(func() error {
			sess, err := c.Start(ctx, cmd)
			if err != nil {
				return err
			}
			conn, err := stream.Dial(gctx, fmt.Sprintf("%s stream %d", c.Host(), i), sess, sess, sess, version, ro, p.src)
			if err != nil {
				sess.Close()
				if errors.Is(err, stream.ErrVersion) {
					return err
				}
				return fmt.Errorf("%w (agent %s on %s)", err, agent, c.Host())
			}
			conns[i] = conn
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		cleanup()
		return nil, nil, err
	}
	return conns, cleanup, nil
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
