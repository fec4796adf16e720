// Package pull is a pull (SRC on a remote host), which turns the roles
// around: the remote host walks and sends, this host receives. This host
// still opens the K SSH connections. On the first it starts `bulkmove
// send-hub`, which listens on a Unix socket in this user's private
// directory (see rundir.Listen) and prints its path and a job token; the
// others reach that socket through sshd's forwarding (or, where sshd
// refuses, a `bulkmove join SOCKET` relay), each proving it holds the
// token as the hub proves it too (see wire.ProveToHub). The hub then runs
// the same sender job as a push, with the K streams as its connections,
// and this host runs a receiver on each.
//
// Both halves are here: Puller is the receiving host's (it dials, starts
// the send-hub and serves the streams with one receive.Hub), and Accept
// is the send-hub's (it takes the streams that join, which the engine's
// sending job then runs over).
//
// It sits below internal/engine, which passes what a pull needs of the
// job (the SSH options, the sender's encoded Config, how to resolve DEST,
// what the receiver allows) and maps its End to the job's outcome. It
// must not import internal/engine.
package pull

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/rundir"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/accepted"
	"github.com/bulkmove/bulkmove/transport/ssh"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// Accept is the send-hub's half: it listens on a socket in this user's
// private directory, prints the banner (the socket and the job token) on
// stdout, and returns the streams of the job: the first on stdin and
// stdout (no Closer), up to jobs-1 more that join through the socket proving the
// token. A failure to listen is said on stdout in place of the banner
// (the puller shows it and stops) and returned. Joins that do not come
// within 30 s are warned of on stderr, and the job goes on with fewer
// streams.
func Accept(jobs int, stdin io.Reader, stdout, stderr io.Writer) ([]accepted.Stream, error) {
	ln, sock, err := rundir.Listen("send")
	if err != nil {
		// One line in place of the banner: the puller shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		return nil, fmt.Errorf("send-hub: %w", err)
	}
	defer ln.Close() // removes the socket
	// Each stream that joins proves it holds the token, and the hub proves
	// it too (see wire.ProveToHub): the source goes to the puller only.
	token := wire.NewToken()
	fmt.Fprintf(stdout, "%s%s job=%s\n", wire.SenderBanner, sock, token)
	streams := []accepted.Stream{{R: stdin, W: stdout}}
	// The puller starts the joins right after reading the banner.
	joinBy := time.Now().Add(30 * time.Second)
	ln.(*net.UnixListener).SetDeadline(joinBy)
	for len(streams) < jobs {
		c, err := ln.Accept()
		if err != nil {
			termsafe.Errorf(stderr, "warning: send-hub: %d of %d streams joined: %v", len(streams), jobs, err)
			break
		}
		c.SetDeadline(joinBy)
		br := bufio.NewReaderSize(c, wire.HubMaxLine)
		if _, _, ok := wire.AcceptHub(c, br, func(verb, id string) (string, string) {
			if verb != wire.HubJoin || id != wire.JobID(token) {
				return "", "no such job"
			}
			return token, ""
		}); !ok {
			continue
		}
		c.SetDeadline(time.Time{})
		streams = append(streams, accepted.Stream{R: br, W: c, C: c})
	}
	return streams, nil
}

// End is how a pull ended.
type End int

const (
	Done        End = iota
	Interrupted     // the context was cancelled
	Failed          // said on Stderr
	Remote          // the remote sender exited with Puller.Status
)

// Puller is the receiving host's half of a pull: it receives Target's
// path into Dest.
type Puller struct {
	Target sshx.Target
	Dest   string // DEST as the command line named it
	Jobs   int    // the streams to open
	SSH    sshx.Options
	// Linker, if set, opens the connections (-e: the system's OpenSSH);
	// else the built-in client does, with SSH.
	Linker sshx.Linker
	// RemoteBulkmove and Version are what EnsureAgent takes: the remote
	// binary to run, and the version it must be.
	RemoteBulkmove, Version string
	// ResolveDest resolves DEST (a symlink to a directory is followed);
	// its error is said as it is.
	ResolveDest func(dest string) (string, error)
	// SenderConfig is the remote sender's Config for the streams that
	// connected, encoded for send-hub's --config.
	SenderConfig func(streams int) (string, error)
	// DstIDs is, where this host can be named, DEST (named as given,
	// target resolved) for send-hub's --dst-ids, which refuses a SRC that
	// overlaps it on the same machine; "" for none.
	DstIDs func(named, target string) string
	// Policy is what the receiver keeps: this command line's to say.
	Policy extract.Policy
	// Pace wraps what each stream receives (--bwlimit): the remote sender
	// slows down as the streams fill up.
	Pace func(io.Reader) io.Reader
	// Items and Pruned, if set, are told what the receiver changed and
	// removed (-i): receive.Hub's.
	Items  func(entries []model.Entry, ack *wire.BatchAck)
	Pruned func(*wire.PruneResult)
	Stderr io.Writer
	// Status is the remote sender's exit status, when Run returns Remote.
	Status int
}

// Run receives the remote SRC into the local DEST.
func (p *Puller) Run(ctx context.Context) End {
	t := p.Target
	linker := p.Linker
	if linker == nil {
		linker = sshx.Builtin(t, p.SSH)
	}
	clients, errs, err := linker.DialN(ctx, p.Jobs)
	if err != nil {
		termsafe.Errorf(p.Stderr, "%v", err)
		return Failed
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, e := range errs {
		termsafe.Errorf(p.Stderr, "warning: %v; going on with %d of %d streams", e, len(clients), p.Jobs)
	}
	self, err := os.Executable()
	if err != nil {
		termsafe.Errorf(p.Stderr, "%v", err)
		return Failed
	}
	agent, err := clients[0].EnsureAgent(ctx, p.RemoteBulkmove, p.Version, wire.Proto, self)
	if err != nil {
		termsafe.Errorf(p.Stderr, "%v", err)
		return Failed
	}
	src := t.Path
	if src == "" {
		src = "."
	}
	// A single-file SRC lands as DEST, or inside DEST if that is a
	// directory (a symlink to one is followed), with its name there.
	dest := p.Dest
	root, err := p.ResolveDest(dest)
	if err != nil {
		termsafe.Errorf(p.Stderr, "%v", err)
		return Failed
	}
	as, target, named := "", root, dest
	isDir, _ := clients[0].Output(ctx, "test -d "+sshx.ShellQuote(src)+" && echo dir")
	if strings.TrimSpace(string(isDir)) != "dir" {
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			root, as = filepath.Dir(root), filepath.Base(root)
		} else {
			target, named = filepath.Join(root, path.Base(src)), filepath.Join(dest, path.Base(src))
		}
	}
	cfg, err := p.SenderConfig(len(clients))
	if err != nil {
		termsafe.Errorf(p.Stderr, "%v", err)
		return Failed
	}
	hubArgs := []string{sshx.ShellQuote(agent), wire.CmdSendHub, "--config", cfg}
	if as != "" {
		hubArgs = append(hubArgs, "--as", sshx.ShellQuote(as))
	}
	if ids := p.DstIDs(named, target); ids != "" {
		hubArgs = append(hubArgs, "--dst-ids", sshx.ShellQuote(ids))
	}
	hubArgs = append(hubArgs, "--", sshx.ShellQuote(src))
	hub, err := clients[0].Start(ctx, strings.Join(hubArgs, " "))
	if err != nil {
		termsafe.Errorf(p.Stderr, "%v", err)
		return Failed
	}
	br := bufio.NewReader(hub)
	line, err := br.ReadString('\n')
	if why, ok := strings.CutPrefix(line, wire.Refused); ok {
		hub.Wait()
		termsafe.Errorf(p.Stderr, "ssh %s refused the job: %s", t.Host, strings.TrimSpace(why))
		return Failed
	}
	if err != nil || !strings.HasPrefix(line, wire.SenderBanner) {
		werr := hub.Wait()
		termsafe.Errorf(p.Stderr, "%s: the remote sender did not start (%q): %v", t.Host, strings.TrimSpace(line), errors.Join(err, werr))
		return Failed
	}
	sock, token, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, wire.SenderBanner)), " job=")
	if token == "" {
		hub.Close()
		termsafe.Errorf(p.Stderr, "%s: the remote sender is an older bulkmove (its banner %q names no job)", t.Host, strings.TrimSpace(line))
		return Failed
	}
	g, gctx := errgroup.WithContext(ctx)
	// One receiver for all streams, as at a remote agent. What it keeps is
	// this command line's to say: the remote sender's Hello asks, within
	// it (a sender there that asks for more is refused, or for owners
	// where --no-owner was given, not heeded).
	recv := &receive.Hub{Root: root, Version: p.Version, Policy: p.Policy, Items: p.Items, Pruned: p.Pruned}
	g.Go(func() error { return recv.Serve(gctx, p.Pace(br), hub) })
	for _, c := range clients[1:] {
		s, _, err := c.Join(ctx, sock, agent)
		if err != nil {
			termsafe.Errorf(p.Stderr, "warning: %v", err)
			continue
		}
		g.Go(func() error {
			defer s.Close()
			br := bufio.NewReaderSize(s, wire.HubMaxLine)
			timer := time.AfterFunc(ssh.BannerTimeout, func() { s.Close() })
			err := wire.ProveToHub(s, br, wire.HubJoin, token)
			if !timer.Stop() && err == nil {
				err = errors.New("timed out")
			}
			if err != nil {
				termsafe.Errorf(p.Stderr, "warning: %s: the remote sender's socket %s: %v", c.Host(), sock, err)
				return nil
			}
			return recv.Serve(gctx, p.Pace(br), s)
		})
	}
	serr := g.Wait()
	werr := hub.Wait()
	var ee *sshx.ExitError
	var refused *wire.RefusedError
	switch {
	case ctx.Err() != nil:
		return Interrupted
	case werr == nil && serr == nil:
		return Done
	case errors.As(serr, &refused):
		// This side refused the remote sender (it asked for what this
		// command line did not allow): said here, in this side's words.
		termsafe.Errorf(p.Stderr, "pull from %s: the remote sender is refused: %s", t.Host, refused.Reason)
		return Failed
	case errors.As(werr, &ee) && ee.Status > 0:
		p.Status = ee.Status
		return Remote
	}
	termsafe.Errorf(p.Stderr, "pull from %s: %v", t.Host, errors.Join(serr, werr))
	return Failed
}
