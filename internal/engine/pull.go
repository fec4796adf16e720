package engine

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/internal/rundir"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/send/source"
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

func (j *job) resolveHub() (plan, int) {
	var p plan
	src, fi, err := resolveSrc(j.src) // as a push resolves it
	if err != nil {
		termsafe.Errorf(j.stderr, "source %s: %v", j.src, Unwrap(err))
		return p, ExitFatal
	}
	p.walkRoot, p.src.Root, p.srcReal = src, src, src
	if !fi.IsDir() {
		p.src = source.Source{Root: filepath.Dir(src), File: src}
		p.rename = filepath.Base(j.src)
		if j.as != "" {
			p.rename = j.as
		}
	}
	return p, ExitOK
}

// RunHub is `bulkmove send-hub [flags] SRC`: the sending end of a pull.
func RunHub(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f moveFlags
	fs := flag.NewFlagSet("bulkmove send-hub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	as := fs.String("as", "", "name of a single-file SRC at the receiver")
	dstIDs := fs.String("dst-ids", "", "the receiver's DEST by device and inode, with its machine (JSON): a SRC that overlaps it on this machine is refused")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		termsafe.Errorf(stderr, "usage: bulkmove send-hub [flags] SRC (started by a pulling bulkmove, not by hand)")
		return ExitUsage
	}
	if err := hubOverlap(fs.Arg(0), *dstIDs); err != nil {
		// One line in place of the banner: the puller shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		return ExitUsage
	}
	f.gentle.Apply(stderr)
	ln, sock, err := rundir.Listen("send")
	if err != nil {
		// One line in place of the banner: the puller shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		termsafe.Errorf(stderr, "send-hub: %v", err)
		return ExitFatal
	}
	defer ln.Close() // removes the socket
	// Each stream that joins proves it holds the token, and the hub proves
	// it too (see wire.ProveToHub): the source goes to the puller only.
	token := wire.NewToken()
	fmt.Fprintf(stdout, "%s%s job=%s\n", wire.SenderBanner, sock, token)
	streams := []duplex{{r: stdin, w: stdout}}
	// The puller starts the joins right after reading the banner.
	joinBy := time.Now().Add(30 * time.Second)
	ln.(*net.UnixListener).SetDeadline(joinBy)
	for len(streams) < f.jobs {
		c, err := ln.Accept()
		if err != nil {
			termsafe.Errorf(stderr, "warning: send-hub: %d of %d streams joined: %v", len(streams), f.jobs, err)
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	j := &job{flags: f, stdout: io.Discard, stderr: stderr, src: fs.Arg(0), dst: "receiver", target: target{hub: streams, as: *as}}
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
	real, _, err := resolveSrc(src)
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

// RunJoin is `bulkmove join SOCKET` (or send-join): relays a stream to a
// hub (an agent's, or the sending end of a pull).
func RunJoin(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		termsafe.Errorf(stderr, "usage: bulkmove send-join SOCKET (started by a pulling bulkmove, not by hand)")
		return ExitUsage
	}
	c, err := net.Dial("unix", args[0])
	if err != nil {
		termsafe.Errorf(stderr, "send-join: %v", err)
		return ExitFatal
	}
	defer c.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(c, stdin); c.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(stdout, c); done <- struct{}{} }()
	<-done
	return ExitOK
}

// pull receives a remote SRC into a local DEST.
func (j *job) pull(ctx context.Context, t sshx.Target) int {
	dest := j.dst
	if j.flags.dryRun {
		termsafe.Errorf(j.stderr, "--dry-run of a pull: run it on %s", t.Host)
		return ExitUsage
	}
	if j.flags.scale.filesFrom != "" {
		termsafe.Errorf(j.stderr, "--files-from with a remote SRC: run it on %s (the list is read where the walk runs)", t.Host)
		return ExitUsage
	}
	// --bwlimit paces what this host receives: the remote sender slows
	// down as the streams fill up.
	bw := newBwControl(j.flags.gentle.bwlimit.sched, nil)
	bw.start(ctx, func(format string, args ...any) { termsafe.Errorf(j.stderr, format, args...) })
	defer bw.stop()
	opt := j.flags.ssh.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	clients, errs, err := sshx.DialN(ctx, t, opt, j.flags.jobs)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitFatal
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for _, e := range errs {
		termsafe.Errorf(j.stderr, "warning: %v; going on with %d of %d streams", e, len(clients), j.flags.jobs)
	}
	self, err := os.Executable()
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitFatal
	}
	agent, err := clients[0].EnsureAgent(ctx, j.flags.ssh.remoteBulkmove, Version, wire.Proto, self)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitFatal
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
		return ExitFatal
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
	hubArgs := []string{sshx.ShellQuote(agent), "send-hub", "-j", fmt.Sprint(len(clients)),
		"--batch-size", j.flags.batchSize.String(), "--batch-files", fmt.Sprint(j.flags.batchFiles)}
	for _, r := range j.flags.rules.List() {
		hubArgs = append(hubArgs, "--filter", sshx.ShellQuote(r))
	}
	if j.flags.fsync {
		hubArgs = append(hubArgs, "--fsync")
	}
	if j.flags.keepSetid {
		hubArgs = append(hubArgs, "--keep-setid")
	}
	if j.flags.noOwner {
		hubArgs = append(hubArgs, "--no-owner")
	}
	if j.flags.oneFS {
		hubArgs = append(hubArgs, "-x") // the walk runs there
	}
	// The sender's side of the streams and of the source's filesystem.
	hubArgs = append(hubArgs, "--io-concurrency", j.flags.ioConc.String(),
		"--retries", fmt.Sprint(j.flags.retries), "--stall-timeout", j.flags.stallTimeout.String())
	if j.flags.delete {
		hubArgs = append(hubArgs, "--delete")
	}
	if j.flags.deleteExcluded {
		hubArgs = append(hubArgs, "--delete-excluded")
	}
	// --no-quick-check, --checksum, --size-only, --ignore-existing.
	hubArgs = append(hubArgs, j.flags.checkArgs()...)
	hubArgs = append(hubArgs, j.flags.faithful.args()...)
	hubArgs = append(hubArgs, "--compress", j.flags.compress.String()) // the hub sends, so it compresses
	hubArgs = append(hubArgs, j.flags.scale.hubArgs()...)
	hubArgs = append(hubArgs, j.flags.gentle.hubArgs()...) // --io-nice, --nice, --max-read-rate: the source is there
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
		return ExitFatal
	}
	br := bufio.NewReader(hub)
	line, err := br.ReadString('\n')
	if why, ok := strings.CutPrefix(line, wire.Refused); ok {
		hub.Wait()
		termsafe.Errorf(j.stderr, "%v", &refusal{host: "ssh " + t.Host, why: strings.TrimSpace(why)})
		return ExitFatal
	}
	if err != nil || !strings.HasPrefix(line, wire.SenderBanner) {
		werr := hub.Wait()
		termsafe.Errorf(j.stderr, "%s: the remote sender did not start (%q): %v", t.Host, strings.TrimSpace(line), errors.Join(err, werr))
		return ExitFatal
	}
	sock, token, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, wire.SenderBanner)), " job=")
	if token == "" {
		hub.Close()
		termsafe.Errorf(j.stderr, "%s: the remote sender is an older bulkmove (its banner %q names no job)", t.Host, strings.TrimSpace(line))
		return ExitFatal
	}
	g, gctx := errgroup.WithContext(ctx)
	// One receiver for all streams, as at a remote agent. What it keeps is
	// this command line's to say: the remote sender's Hello asks, within
	// it (a sender there that asks for more is refused, or for owners
	// where --no-owner was given, not heeded).
	recv := &receive.Hub{Root: root, Version: Version, Policy: j.allowed().Policy(pullHint)}
	g.Go(func() error { return recv.Serve(gctx, bw.reader(br), hub) })
	for _, c := range clients[1:] {
		s, _, err := c.Join(ctx, sock, agent)
		if err != nil {
			termsafe.Errorf(j.stderr, "warning: %v", err)
			continue
		}
		g.Go(func() error {
			defer s.Close()
			br := bufio.NewReaderSize(s, wire.HubMaxLine)
			timer := time.AfterFunc(bannerTimeout, func() { s.Close() })
			err := wire.ProveToHub(s, br, wire.HubJoin, token)
			if !timer.Stop() && err == nil {
				err = errors.New("timed out")
			}
			if err != nil {
				termsafe.Errorf(j.stderr, "warning: %s: the remote sender's socket %s: %v", c.Host(), sock, err)
				return nil
			}
			return recv.Serve(gctx, bw.reader(br), s)
		})
	}
	serr := g.Wait()
	werr := hub.Wait()
	var ee *sshx.ExitError
	var refused *wire.RefusedError
	switch {
	case ctx.Err() != nil:
		return ExitInterrupted
	case werr == nil && serr == nil:
		return ExitOK
	case errors.As(serr, &refused):
		// This side refused the remote sender (it asked for what this
		// command line did not allow): said here, in this side's words.
		termsafe.Errorf(j.stderr, "pull from %s: the remote sender is refused: %s", t.Host, refused.Reason)
		return ExitFatal
	case errors.As(werr, &ee) && ee.Status > 0:
		return ee.Status
	}
	termsafe.Errorf(j.stderr, "pull from %s: %v", t.Host, errors.Join(serr, werr))
	return ExitFatal
}
