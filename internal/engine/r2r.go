package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/internal/engine/autojobs"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/transport"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/ssh"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
	"github.com/bulkmove/bulkmove/wire"
)

// remoteToRemote moves box1's SRC (src) into box2's DEST (dst) from this
// host, the control host, which logs in to both: it starts the agent on
// box2 with its data plane, and on box1 the sender (R2RSender), which it
// tells how to reach that agent over its stdin. The data goes from box1
// to box2 by the first of these that connects:
//
//  1. box1 dials the agent's data port (TLS, pinned to its fingerprint);
//  2. box2's agent dials box1, which listens (r2rReverse): where only
//     that direction is open;
//  3. box1 pushes over SSH to box2 with its own keys and known_hosts (and
//     this host's agent, forwarded with --forward-agent): a host key of
//     box2 that changed there ends the move, no other path is tried;
//  4. the streams are relayed through this host: box1's sshd listens on
//     its loopback for them (ssh -R) and this host carries every byte to
//     the agent's data port, still TLS from box1 to box2, with a warning.
//
// box1's sender reports the job as a push does (its messages on stderr,
// its --json events, -i lines and --stats on stdout) and its progress,
// which this host draws; its exit status is this command's.
func (j *job) remoteToRemote(ctx context.Context, src, dst sshx.Target) Outcome {
	switch {
	case j.flags.DryRun:
		return j.fail(UsageError, fmt.Errorf("--dry-run of a remote-to-remote move: run it on %s", src.Host))
	case j.flags.Scale.FilesFrom != "":
		return j.fail(UsageError, fmt.Errorf("--files-from with a remote SRC: run it on %s (the list is read where the walk runs)", src.Host))
	case j.flags.SSH.Rsh != "":
		return j.fail(UsageError, errors.New("-e with a remote-to-remote move: it needs the built-in SSH client (its forwarding carries the relay)"))
	}
	opt := j.flags.SSH.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	c := j.flags.forR2R()
	// box1's figures, sent with its progress, are this host's measure of
	// the move: its --metrics-addr and --metrics-textfile while the move
	// runs, the last textfile and --pushgateway at the end (writeOutcome).
	measured := newMeasure(max(c.Jobs, c.Auto.Max))
	measured.Start = j.start
	j.r2rLimit = &r2rLimit{m: measured}
	sigCtx, stopSigs := context.WithCancel(ctx)
	defer stopSigs()
	go j.r2rLimit.relaySignals(sigCtx, j.asks, j.stderr)
	if sh := j.flags.Scale.Shard; !sh.All() {
		measured.Shard = sh.String()
	}
	stopObs, err := j.observeRemote(ctx, measured)
	if err != nil {
		return j.fail(UsageError, err)
	}
	defer stopObs()
	j.m = measured
	// box1's sender and box2's agent start at once: each is a login and
	// a process's start, which a busy host makes slow. The agent's root
	// is DEST for a directory SRC; a single file that lands as DEST needs
	// its parent, and the agent is started again once box1 says so.
	s1 := make(chan r2rStarted, 1)
	go func() { s1 <- j.r2rSender(ctx, src, opt, c) }()
	var p plan
	j.remoteDest(ctx, dst, &p)
	tr := j.r2rAgent(dst, opt, p)
	defer func() { tr.Close() }()
	ag, aerr := tr.StartAgent(ctx, c.Jobs)
	st := <-s1
	if st.c1 != nil {
		defer st.c1.Close()
	}
	if st.sess != nil {
		defer st.sess.Close()
	}
	if st.err != nil {
		return j.fail(Failed, st.err)
	}
	// box1's job runs already: its output and progress are followed from
	// now on, and it waits for the path its streams take.
	c1, sess := st.c1, st.sess
	replies, end := j.r2rFollow(ctx, src.Host, sess, st.br)
	say := func(p r2rPath) (string, string) {
		b, _ := json.Marshal(p)
		if _, err := fmt.Fprintf(sess, "%s\n", b); err != nil {
			return "fail", err.Error()
		}
		r, ok := <-replies
		if !ok {
			return "ended", ""
		}
		return r[0], r[1]
	}
	// none tells box1's job that no path works, and why: its error, its
	// exit code.
	none := func(why string) Outcome {
		say(r2rPath{Via: "none", Why: "remote to remote: " + why})
		return end()
	}
	if aerr != nil {
		return none(aerr.Error())
	}
	if st.kind == "file" {
		f := plan{rename: "?"}
		if j.remoteDest(ctx, dst, &f); f.dstRoot != p.dstRoot {
			tr.Close()
			tr = j.r2rAgent(dst, opt, f)
			if ag, aerr = tr.StartAgent(ctx, c.Jobs); aerr != nil {
				return none(aerr.Error())
			}
		}
	}
	// 1. box1 dials box2's data port.
	at := net.JoinHostPort(ag.Host, strconv.Itoa(ag.Offer.Port))
	verb, why := say(r2rPath{Via: "tls", Dest: j.dst, Host: ag.Host, Name: ag.Name, Offer: ag.Offer.String()})
	switch verb {
	case "go":
		j.trace("remote to remote: %s sends straight to %s's data port %s (%s)", src.Host, dst.Host, at, ag.Offer.Mode)
		return end()
	case "ended":
		return end()
	case "no":
	default:
		return none(why)
	}
	direct := why
	j.trace("remote to remote: %s cannot reach %s's data port %s: %s; trying %s dialling %s", src.Host, dst.Host, at, direct, dst.Host, src.Host)
	// 2. box2's agent dials box1, which listens.
	verb, why = j.r2rReverse(ctx, say, src.Host, dst.Host, c1, tr)
	switch verb {
	case "go", "ended":
		return end()
	case "no":
	default:
		return none(why)
	}
	reverse := why
	j.trace("remote to remote: %s cannot dial %s: %s; trying SSH from %s to %s", dst.Host, src.Host, reverse, src.Host, dst.Host)
	// 3. box1 pushes over SSH with its own keys.
	verb, why = say(r2rPath{Via: "ssh", Dest: j.dst})
	if verb == "nokey" {
		verb = "no"
		if !j.flags.SSH.ForwardAgent {
			why += fmt.Sprintf(" (%s has no key %s accepts: --forward-agent lends it this host's SSH agent)", src.Host, dst.Host)
		}
	}
	switch verb {
	case "go":
		tr.Close() // box1's push starts its own agent
		j.trace("remote to remote: %s pushes to %s over SSH with its own keys and known_hosts", src.Host, dst.Host)
		return end()
	case "ended":
		return end()
	case "no":
	default:
		return none(fmt.Sprintf("logging in from %s to %s: %s", src.Host, dst.Host, why))
	}
	overSSH := why
	// 4. Through this host.
	l, err := c1.ListenRemote("127.0.0.1:0")
	if err != nil {
		return none(fmt.Sprintf("no path from %s to %s: its data port %s: %s; %s dialling %s: %s; SSH from %s: %s; a relay through this host: %v",
			src.Host, dst.Host, at, direct, dst.Host, src.Host, reverse, src.Host, overSSH, err))
	}
	defer l.Close()
	go j.r2rRelay(ctx, l, tr, at)
	relayed := ag.Offer
	relayed.Port = l.Addr().(*net.TCPAddr).Port
	termsafe.Errorf(j.stderr, "warning: remote to remote: every byte goes through this host: %s reaches neither %s's data port %s (%s) nor %s over SSH (%s), and %s cannot dial %s (%s)",
		src.Host, dst.Host, at, direct, dst.Host, overSSH, dst.Host, src.Host, reverse)
	verb, why = say(r2rPath{Via: "tls", Dest: j.dst, Host: "127.0.0.1", Name: dst.Host + " (relayed)", Offer: relayed.String()})
	switch verb {
	case "go":
		j.trace("remote to remote: relayed through this host, %s's loopback port %d to %s", src.Host, relayed.Port, at)
		return end()
	case "ended":
		return end()
	}
	return none(fmt.Sprintf("no path from %s to %s: its data port %s: %s; %s dialling %s: %s; SSH from %s: %s; a relay through this host: %s",
		src.Host, dst.Host, at, direct, dst.Host, src.Host, reverse, src.Host, overSSH, why))
}

// r2rReverse tries the path where box2's agent (tr) dials box1 (c1),
// which listens: where only that direction is open. box1 listens on the
// address this host's SSH connection reached it on, at a port of
// --data-ports, with a throwaway certificate and token that this host
// passes on to the agent over its SSH channel; the agent dials and
// answers how many streams it opened, which box1's job then takes. verb
// is say's: "go", "ended", "no" (why: the path does not work) or "fail".
func (j *job) r2rReverse(ctx context.Context, say func(r2rPath) (string, string), box1, box2 string, c1 *sshx.Client, tr *ssh.Transport) (verb, why string) {
	verb, why = say(r2rPath{Via: "listen", Dest: j.dst, Ports: j.flags.DataPorts})
	switch verb {
	case "listening":
	case "no", "fail": // "fail": a sender that does not know the path (--remote-bulkmove, older)
		return "no", fmt.Sprintf("%s cannot listen: %s", box1, why)
	default:
		return verb, why
	}
	host, offer, _ := strings.Cut(why, " ")
	o, err := dataplane.ParseOffer(offer)
	if err != nil {
		return "fail", fmt.Sprintf("%s's sender: %v", box1, err)
	}
	if host == "-" { // box1 listens on all its addresses
		host = c1.HostName()
	}
	at := net.JoinHostPort(host, strconv.Itoa(o.Port))
	n, err := tr.AskDial(ctx, host, o)
	if n == 0 {
		return "no", fmt.Sprintf("its port %s: %v", at, err)
	}
	if err != nil {
		termsafe.Errorf(j.stderr, "warning: remote to remote: %s opened %d of %d streams to %s's port %s: %v", box2, n, j.flags.forR2R().Jobs, box1, at, err)
	}
	verb, why = say(r2rPath{Via: "accept", Dest: j.dst, Name: box2, Streams: n})
	if verb == "go" {
		j.trace("remote to remote: %s dials %s's port %s (%s), the one direction open between them", box2, box1, at, o.Mode)
	}
	return verb, why
}

// r2rStarted is box1's sender, started (r2rSender): the connection, the
// session and its output, and what SRC is there ("dir" or "file").
type r2rStarted struct {
	c1   *sshx.Client
	sess *sshx.Session
	br   *bufio.Reader
	kind string
	err  error
}

// r2rSender logs in to box1 and starts the sender there with the job's
// options c: at once with the bulkmove there of this version (or the one
// --remote-bulkmove names), and only if there is none, after the search
// and upload EnsureAgent does.
func (j *job) r2rSender(ctx context.Context, src sshx.Target, opt sshx.Options, c Config) (st r2rStarted) {
	go agentbin.SelfSum() // while the login runs
	if st.c1, st.err = sshx.Dial(ctx, src, opt); st.err != nil {
		return st
	}
	if j.flags.SSH.ForwardAgent {
		if st.err = st.c1.ForwardAgent(); st.err != nil {
			return st
		}
	}
	cfg, err := EncodeSenderConfig(c)
	if err != nil {
		st.err = err
		return st
	}
	path := src.Path
	if path == "" {
		path = "."
	}
	verify := ""
	if j.verifyAs != "" {
		verify = " --verify " + j.verifyAs
	}
	if j.log != nil { // box1's per-entry lines, for this host's --log-file
		verify += " --log"
		if f := j.flags.LogFileFormat; f != "" {
			verify += " --log-format " + sshx.ShellQuote(f)
		}
	}
	args := fmt.Sprintf("%s --config %s%s -- %s %s", wire.CmdR2RSend, cfg, verify, sshx.ShellQuote(path), sshx.ShellQuote(j.dst))
	self, err := os.Executable()
	if err != nil {
		st.err = err
		return st
	}
	bin := j.flags.SSH.RemoteBulkmove
	for try := 0; ; try++ {
		cmd := ""
		if bin != "" {
			cmd = sshx.ShellQuote(bin) + " " + args
		} else {
			sum, err := agentbin.SelfSum()
			if err != nil {
				st.err = fmt.Errorf("reading this executable: %w", err)
				return st
			}
			cmd = agentbin.Command(Version, wire.Proto, sum, args)
		}
		if st.sess, st.err = st.c1.StartOwn(ctx, cmd, j.flags.SSH.ForwardAgent); st.err != nil {
			return st
		}
		st.br = bufio.NewReader(st.sess)
		verb, kind := r2rReply(st.br)
		if verb == "hello" {
			st.kind = kind
			return st
		}
		if try == 0 && bin == "" && strings.Contains(kind, agentbin.NoAgent) {
			st.sess.Close()
			if bin, st.err = st.c1.EnsureAgent(ctx, "", Version, wire.Proto, self); st.err != nil {
				return st
			}
			continue
		}
		st.err = fmt.Errorf("%s: the sender did not start: %v", src.Host, errors.Join(errors.New(strings.TrimSpace(verb+" "+kind)), st.sess.Wait()))
		return st
	}
}

// r2rAgent is the SSH transport that starts box2's agent for p's root.
func (j *job) r2rAgent(dst sshx.Target, opt sshx.Options, p plan) *ssh.Transport {
	return ssh.New(ssh.Config{Target: dst, Options: opt, Dialer: j.dialerFor(p), Root: p.dstRoot,
		Nice: j.flags.Gentle.NiceFlags.Text(), AllowFlags: j.allowed().Text(), Allow: wire.Allow(j.allowed()),
		Data: j.flags.Transport, DataAddr: j.flags.DataAddr, DataPorts: j.flags.DataPorts, RemoteBulkmove: j.flags.SSH.RemoteBulkmove})
}

// forR2R is c as box1's sender takes it: without what only the control
// host uses (its log, metrics, progress display, how it reaches either
// host, the data plane of the agent it starts), and with as many streams
// as that agent takes (-j auto's start: its data plane admits no more).
func (c Config) forR2R() Config {
	s := c
	if c.Auto.On {
		s.Jobs = min(autojobs.Start, c.Auto.Max)
	}
	s.Auto = AutoJobs{Max: c.Auto.Max}
	s.LogFile, s.LogFileFormat, s.LogLevel = "", "", DefaultConfig().LogLevel // the format goes in --log-format
	s.Obs = DefaultConfig().Obs
	s.Progress = "none"
	s.SSH, s.Serve = SSHConfig{RemoteBulkmove: c.SSH.RemoteBulkmove}, ServeClient{}
	s.Transport, s.DataPorts, s.DataAddr, s.ViaAgent = "ssh", "", "", false
	return s
}

// r2rReply reads box1's next line for the control host: its verb (hello,
// go, no, fail) and the rest. A line that is not one, or none, reads as
// fail.
func r2rReply(br *bufio.Reader) (verb, rest string) {
	line, err := br.ReadString('\n')
	m, ok := strings.CutPrefix(line, r2rMark)
	if !ok {
		if err != nil && line == "" {
			return "fail", err.Error()
		}
		return "fail", fmt.Sprintf("unexpected output %q", strings.TrimSpace(line))
	}
	verb, rest, _ = strings.Cut(strings.TrimSpace(m), " ")
	return verb, rest
}

// r2rFollow follows box1's sender from its start: its output is this
// command's, its progress drawn here, and its answers to the paths it is
// told come on replies (verb and the rest), which closes at the end of
// its output; a graceful stop asked here is passed on. end waits for
// that end and is the outcome of its exit status.
func (j *job) r2rFollow(ctx context.Context, box1 string, sess *sshx.Session, br *bufio.Reader) (<-chan [2]string, func() Outcome) {
	var show func(progressline.Job)
	stop := func() {}
	if j.remoteProgress != nil {
		show, stop = j.remoteProgress()
	}
	measured := j.m
	replies := make(chan [2]string, 1)
	done := make(chan struct{})
	go func() {
		select {
		case <-j.drain:
			io.WriteString(sess, "drain\n")
		case <-done:
		}
	}()
	go func() {
		defer close(done)
		defer close(replies)
		for {
			line, err := br.ReadBytes('\n')
			if m, ok := bytes.CutPrefix(line, []byte(r2rMark)); ok {
				if l, ok := bytes.CutPrefix(m, []byte("log ")); ok {
					// A --log-file line of box1's job, as it was.
					if j.log != nil {
						j.log.Write(append(bytes.TrimSuffix(l, []byte("\n")), '\n'))
					}
					if err != nil {
						return
					}
					continue
				}
				verb, rest, _ := strings.Cut(strings.TrimSpace(string(m)), " ")
				if verb == "logged" {
					var n r2rLogged
					if json.Unmarshal([]byte(rest), &n) == nil {
						j.logged.add(func(l *Logged) {
							l.Created += n.Created
							l.Changed += n.Changed
							l.Deleted += n.Deleted
							l.BackedUp += n.BackedUp
							l.Failed += n.Failed
							l.Bytes += n.Bytes
						})
					}
				} else if verb != "progress" {
					if verb == "go" && j.r2rLimit != nil { // box1's streams have a path: it takes limits now
						j.r2rLimit.open(sess)
					}
					replies <- [2]string{verb, rest}
				} else {
					var st r2rStatus
					if json.Unmarshal([]byte(rest), &st) == nil {
						st.measure(measured)
						if show != nil {
							show(st.Job)
						}
					}
				}
			} else if len(line) > 0 {
				if j.ev != nil {
					j.ev.writer().Relay(line)
				} else {
					j.stdout.Write(line)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return replies, func() Outcome {
		for range replies {
		}
		<-done
		stop()
		werr := sess.Wait()
		var ee *sshx.ExitError
		switch {
		case ctx.Err() != nil:
			return Interrupted
		case werr == nil:
			return Done
		case errors.As(werr, &ee) && ee.Status > 0:
			return remoteOutcome(ee.Status)
		}
		return j.fail(Failed, fmt.Errorf("remote to remote: the sender on %s: %w", box1, werr))
	}
}

// r2rRelay carries each stream box1 opens to the forwarded port (l) to
// the agent's data port at: straight from this host if it reaches it,
// else through box2's sshd (tr's connection).
func (j *job) r2rRelay(ctx context.Context, l net.Listener, tr *ssh.Transport, at string) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			d := net.Dialer{Timeout: r2rProbeTimeout}
			out, err := d.DialContext(ctx, "tcp", at)
			if err != nil {
				out, err = tr.DialAgent(ctx)
			}
			if err != nil {
				termsafe.Errorf(j.stderr, "warning: remote to remote: relaying a stream to %s: %v", at, err)
				in.Close()
				return
			}
			transport.Splice(in, out)
		}()
	}
}

// r2rLimit is a remote-to-remote move's bandwidth limit as the control
// host's /bwlimit sees it: box1's, which its sender applies to its
// streams and reports with its progress (into m.Limit), asked of it as a
// "bwlimit RATE" line on its stdin once its streams have a path.
type r2rLimit struct {
	m  *metrics.Job
	mu sync.Mutex
	w  io.Writer // box1's stdin, once it said "go"
}

func (l *r2rLimit) open(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w = w
}

func (l *r2rLimit) ask(rate int64, _ string) error {
	if err := l.tell(fmt.Sprintf("bwlimit %d", rate)); err != nil {
		return err
	}
	l.m.Limit.SetRate(rate) // shown at once; box1's next progress says what holds
	return nil
}

// tell writes line to box1's sender, once its streams have a path.
func (l *r2rLimit) tell(line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return errors.New("the move's streams have no path to DEST yet: the limit is box1's once they have one; ask again then")
	}
	if _, err := io.WriteString(l.w, line+"\n"); err != nil {
		return fmt.Errorf("asking box1's sender for the limit: %w", err)
	}
	return nil
}

// relaySignals passes this host's requests to halve or double the limit
// (asks: SIGUSR1, SIGUSR2) on to box1's sender until ctx ends; one that
// cannot go yet is dropped, and stderr says why.
func (l *r2rLimit) relaySignals(ctx context.Context, asks <-chan throttle.Request, stderr io.Writer) {
	for {
		var r throttle.Request
		select {
		case <-ctx.Done():
			return
		case r = <-asks: // nil: never
		}
		line := "halve"
		if r.Op == throttle.Double {
			line = "double"
		}
		if err := l.tell(line); err != nil {
			termsafe.Errorf(stderr, "warning: %s: %v", r.Why, err)
		}
	}
}
