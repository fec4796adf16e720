package engine

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

	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/rundir"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/ssh"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// Pulling (SRC on a remote host) turns the roles around: the remote host
// walks and sends, this host receives. This host still opens the K SSH
// connections. On the first it starts `bulkmove send-hub`, which listens on
// a Unix socket in this user's private directory (see rundir.Listen) and
// prints its path and a job token; the others reach that socket through
// sshd's forwarding (or, where sshd refuses, a `bulkmove join SOCKET`
// relay), each proving it holds the token as the hub proves it too (see
// wire.ProveToHub).
// The hub then runs the same sender job as a push, with the K streams as
// its connections, and this host runs an agent on each.

// duplex is one stream handed to the hub.
type duplex struct {
	r io.Reader
	w io.Writer
	c io.Closer
}

func (j *job) resolveHub() (plan, Outcome) {
	var p plan
	src, fi, err := ResolveSrc(j.src) // as a push resolves it
	if err != nil {
		termsafe.Errorf(j.stderr, "source %s: %v", j.src, Unwrap(err))
		return p, Failed
	}
	p.walkRoot, p.src.Root, p.srcReal = src, src, src
	if !fi.IsDir() {
		p.src = source.Source{Root: filepath.Dir(src), File: src}
		p.rename = filepath.Base(j.src)
		if j.as != "" {
			p.rename = j.as
		}
	}
	return p, Done
}

// Hub is the sending end of a pull (bulkmove send-hub): it walks Src as
// Config says and sends it over the streams the puller opens, the first
// on Stdin and Stdout, the others through a socket each joins. As names a
// single-file Src at the receiver; DstIDs is the puller's DEST (JSON of
// a HostPlace), for refusing a Src that overlaps it on this machine.
type Hub struct {
	Config  Config
	Src, As string
	DstIDs  string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Limit   <-chan throttle.Request // as Job.Limit
}

// Run serves the pull until the job is over.
func (h Hub) Run(ctx context.Context) Outcome {
	f, stdout, stderr := h.Config, h.Stdout, h.Stderr
	if err := hubOverlap(h.Src, h.DstIDs); err != nil {
		// One line in place of the banner: the puller shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		return UsageError
	}
	f.Gentle.Apply(stderr)
	ln, sock, err := rundir.Listen("send")
	if err != nil {
		// One line in place of the banner: the puller shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		termsafe.Errorf(stderr, "send-hub: %v", err)
		return Failed
	}
	defer ln.Close() // removes the socket
	// Each stream that joins proves it holds the token, and the hub proves
	// it too (see wire.ProveToHub): the source goes to the puller only.
	token := wire.NewToken()
	fmt.Fprintf(stdout, "%s%s job=%s\n", wire.SenderBanner, sock, token)
	streams := []duplex{{r: h.Stdin, w: stdout}}
	// The puller starts the joins right after reading the banner.
	joinBy := time.Now().Add(30 * time.Second)
	ln.(*net.UnixListener).SetDeadline(joinBy)
	for len(streams) < f.Jobs {
		c, err := ln.Accept()
		if err != nil {
			termsafe.Errorf(stderr, "warning: send-hub: %d of %d streams joined: %v", len(streams), f.Jobs, err)
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
		streams = append(streams, duplex{r: br, w: c, c: c})
	}
	ln.Close()
	j := &job{flags: f, stdout: io.Discard, stderr: stderr, src: h.Src, dst: "receiver", target: target{hub: streams, as: h.As}}
	j.asks = h.Limit
	return j.run(ctx)
}

// hubOverlap refuses, on the host of a pull's SRC, a SRC that overlaps
// the puller's DEST (dstIDs, JSON of a HostPlace) on this same machine.
// A SRC that cannot be resolved is left to the job, which reports it.
func hubOverlap(src, dstIDs string) error {
	if dstIDs == "" {
		return nil
	}
	dst, err := DecodeHostPlace(dstIDs)
	if err != nil {
		return err
	}
	if !dst.SameHost() {
		return nil
	}
	real, _, err := ResolveSrc(src)
	if err != nil {
		return nil
	}
	s, err := PlaceOf(src, real)
	if err != nil {
		return nil
	}
	if err := Overlap(s, dst.Place); err != nil {
		return fmt.Errorf("on this host, %w", err)
	}
	return nil
}

// pull receives a remote SRC into a local DEST.
func (j *job) pull(ctx context.Context, t sshx.Target) Outcome {
	dest := j.dst
	if j.flags.DryRun {
		termsafe.Errorf(j.stderr, "--dry-run of a pull: run it on %s", t.Host)
		return UsageError
	}
	if j.flags.Scale.FilesFrom != "" {
		termsafe.Errorf(j.stderr, "--files-from with a remote SRC: run it on %s (the list is read where the walk runs)", t.Host)
		return UsageError
	}
	// --bwlimit paces what this host receives: the remote sender slows
	// down as the streams fill up.
	bw := throttle.New(j.flags.Gentle.BwLimit, nil, j.asks)
	bw.Start(ctx, func(format string, args ...any) { termsafe.Errorf(j.stderr, format, args...) })
	defer bw.Stop()
	opt := j.flags.SSH.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	clients, errs, err := sshx.DialN(ctx, t, opt, j.flags.Jobs)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, e := range errs {
		termsafe.Errorf(j.stderr, "warning: %v; going on with %d of %d streams", e, len(clients), j.flags.Jobs)
	}
	self, err := os.Executable()
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	agent, err := clients[0].EnsureAgent(ctx, j.flags.SSH.RemoteBulkmove, Version, wire.Proto, self)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	src := t.Path
	if src == "" {
		src = "."
	}
	// A single-file SRC lands as DEST, or inside DEST if that is a
	// directory (a symlink to one is followed), with its name there.
	root, err := ResolveDest(dest)
	if err != nil {
		termsafe.Errorf(j.stderr, "destination %s: %v", dest, Unwrap(err))
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
	// The sender's options, as it takes them: the whole Config, less what
	// only this host uses (forSender).
	cfg, err := EncodeSenderConfig(j.flags.forSender(len(clients)))
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	hubArgs := []string{sshx.ShellQuote(agent), "send-hub", "--config", cfg}
	if as != "" {
		hubArgs = append(hubArgs, "--as", sshx.ShellQuote(as))
	}
	if id := HostID(); id != "" {
		// Where SRC's host is this one, the send-hub refuses a DEST
		// that overlaps SRC.
		if pl, err := PlaceOf(named, target); err == nil {
			hubArgs = append(hubArgs, "--dst-ids", sshx.ShellQuote(HostPlace{Machine: id, Place: pl}.Encode()))
		}
	}
	hubArgs = append(hubArgs, "--", sshx.ShellQuote(src))
	hub, err := clients[0].Start(ctx, strings.Join(hubArgs, " "))
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return Failed
	}
	br := bufio.NewReader(hub)
	line, err := br.ReadString('\n')
	if why, ok := strings.CutPrefix(line, wire.Refused); ok {
		hub.Wait()
		termsafe.Errorf(j.stderr, "%v", &refusal{host: "ssh " + t.Host, why: strings.TrimSpace(why)})
		return Failed
	}
	if err != nil || !strings.HasPrefix(line, wire.SenderBanner) {
		werr := hub.Wait()
		termsafe.Errorf(j.stderr, "%s: the remote sender did not start (%q): %v", t.Host, strings.TrimSpace(line), errors.Join(err, werr))
		return Failed
	}
	sock, token, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, wire.SenderBanner)), " job=")
	if token == "" {
		hub.Close()
		termsafe.Errorf(j.stderr, "%s: the remote sender is an older bulkmove (its banner %q names no job)", t.Host, strings.TrimSpace(line))
		return Failed
	}
	g, gctx := errgroup.WithContext(ctx)
	// One receiver for all streams, as at a remote agent. What it keeps is
	// this command line's to say: the remote sender's Hello asks, within
	// it (a sender there that asks for more is refused, or for owners
	// where --no-owner was given, not heeded).
	recv := &receive.Hub{Root: root, Version: Version, Policy: j.allowed().Policy(pullHint)}
	g.Go(func() error { return recv.Serve(gctx, bw.Reader(br), hub) })
	for _, c := range clients[1:] {
		s, _, err := c.Join(ctx, sock, agent)
		if err != nil {
			termsafe.Errorf(j.stderr, "warning: %v", err)
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
				termsafe.Errorf(j.stderr, "warning: %s: the remote sender's socket %s: %v", c.Host(), sock, err)
				return nil
			}
			return recv.Serve(gctx, bw.Reader(br), s)
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
		termsafe.Errorf(j.stderr, "pull from %s: the remote sender is refused: %s", t.Host, refused.Reason)
		return Failed
	case errors.As(werr, &ee) && ee.Status > 0:
		return remoteOutcome(ee.Status)
	}
	termsafe.Errorf(j.stderr, "pull from %s: %v", t.Host, errors.Join(serr, werr))
	return Failed
}
