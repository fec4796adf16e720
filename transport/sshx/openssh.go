package sshx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/bulkmove/bulkmove/internal/shell"
	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
	"github.com/bulkmove/bulkmove/wire"
)

// OpenSSH is the system's OpenSSH client, or any command that takes ssh's
// arguments, in place of this package's own (-e/--rsh COMMAND): every
// remote command runs as a process of its own,
//
//	COMMAND [-l USER] [-p PORT] [-i ID]... [-F CONFIG] [-J JUMP] HOST CMD
//
// so that whatever the user's ssh_config says applies as it does for ssh:
// Kerberos/GSSAPI, FIDO or PKCS#11 keys, a ProxyCommand with site
// tooling, a ControlMaster. Each of a job's K streams is then its own ssh
// process and, unless a ControlMaster shares one, its own TCP connection.
//
// A passphrase, password or host-key question is asked once for the job,
// not once per process: the processes ask through SSH_ASKPASS, which this
// binary answers (see Askpass) from what the user typed the first time.
type OpenSSH struct {
	argv   []string // COMMAND, split into words
	target Target
	opts   Options
	notes  *notes
	ask    *Askpass // nil: ssh prompts on the terminal itself

	nameOnce sync.Once
	hostName string // what `COMMAND -G` says HostName is
	endpoint string // user@hostname:port, from the same
}

// NewOpenSSH is the client that runs command (split into words as ssh
// splits a ProxyCommand) to reach t. o's Port, Identities, ConfigFile,
// Jump and AcceptNewHostKey become ssh's flags; the rest of o is ssh's own
// business (its ssh_config) except Stderr, where the remote's stderr and
// ssh's own messages go, each line prefixed with the host.
//
// If this process has a terminal (and o.Batch is not set), the processes'
// prompts come to it through an Askpass, which Close stops.
func NewOpenSSH(command string, t Target, o Options) (*OpenSSH, error) {
	argv, err := RshCommand(command)
	if err != nil {
		return nil, err
	}
	if err := checkNames(t.Host, t.User); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	s := &OpenSSH{argv: argv, target: t, opts: o, notes: newNotes(o.Stderr)}
	if !o.Batch {
		if s.ask, err = NewAskpass(); err != nil {
			return nil, fmt.Errorf("-e: answering ssh's prompts: %w", err)
		}
	}
	return s, nil
}

// Close stops answering the processes' prompts, and forgets the answers.
func (s *OpenSSH) Close() error { return s.ask.Close() }

// RshCommand splits -e's command into words, as ssh splits a
// ProxyCommand, and finds its program: an error names -e and the cause.
func RshCommand(command string) ([]string, error) {
	argv, err := splitArgs(command)
	if err != nil {
		return nil, fmt.Errorf("-e %q: %w", command, err)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("-e %q: no command", command)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("-e %q: %w", command, err)
	}
	return argv, nil
}

// Command is the command line that runs cmd on the remote host.
func (s *OpenSSH) Command(cmd string) []string {
	args := append([]string(nil), s.argv...)
	args = append(args, s.flags()...)
	return append(args, s.target.Host, cmd)
}

// flags are the options bulkmove's own flags (and the target's user and
// port) ask of ssh.
func (s *OpenSSH) flags() []string {
	var a []string
	if s.target.User != "" {
		a = append(a, "-l", s.target.User)
	}
	port := s.target.Port
	if port == 0 {
		port = s.opts.Port
	}
	if port != 0 {
		a = append(a, "-p", strconv.Itoa(port))
	}
	for _, id := range s.opts.Identities {
		a = append(a, "-i", id)
	}
	if s.opts.ConfigFile != "" {
		a = append(a, "-F", s.opts.ConfigFile)
	}
	if s.opts.Jump != "" {
		a = append(a, "-J", s.opts.Jump)
	}
	if s.opts.AcceptNewHostKey {
		a = append(a, "-o", "StrictHostKeyChecking=accept-new")
	}
	return a
}

// names asks COMMAND -G (OpenSSH's resolved configuration, printed
// without connecting) for the host's real name, user and port. A command
// that is not OpenSSH's ssh does not know -G: the host as given then.
func (s *OpenSSH) names() {
	s.nameOnce.Do(func() {
		s.hostName = s.target.Host
		s.endpoint = s.target.Host
		args := append([]string(nil), s.argv[1:]...)
		args = append(args, s.flags()...)
		args = append(args, "-G", s.target.Host)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, s.argv[0], args...).Output()
		if err != nil {
			return
		}
		kv := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), " ")
			if ok {
				if _, seen := kv[k]; !seen {
					kv[k] = v
				}
			}
		}
		if h := kv["hostname"]; h != "" {
			s.hostName = h
		}
		if kv["user"] != "" && kv["port"] != "" {
			s.endpoint = fmt.Sprintf("%s@%s:%s", kv["user"], s.hostName, kv["port"])
		}
	})
}

// Link is one of the job's connections: what runs over it runs in
// processes of its own, which Close ends.
func (s *OpenSSH) Link() *OpenSSHLink {
	return &OpenSSHLink{s: s}
}

// OpenSSHLink is a connection of OpenSSH's: it holds the processes
// started through it.
type OpenSSHLink struct {
	s      *OpenSSH
	mu     sync.Mutex
	procs  []*ExecSession
	closed bool
}

// Host is the host as given.
func (l *OpenSSHLink) Host() string { return l.s.target.Host }

// HostName is the host's real name, as ssh_config (ssh -G) resolves it.
func (l *OpenSSHLink) HostName() string { l.s.names(); return l.s.hostName }

// Endpoint names the account, user@hostname:port, where ssh -G says.
func (l *OpenSSHLink) Endpoint() string { l.s.names(); return "rsh:" + l.s.endpoint }

// PathRTT is not known: the TCP connection is ssh's.
func (l *OpenSSHLink) PathRTT() (time.Duration, bool) { return 0, false }

// ErrNoForward is Forward's error: sshd's forwarding to a socket is the
// built-in client's; over a COMMAND a relay process joins it instead.
var ErrNoForward = errors.New("no socket forwarding through -e (a relay joins instead)")

// Forward is not done through COMMAND: ErrNoForward.
func (l *OpenSSHLink) Forward(context.Context, string) (io.ReadWriteCloser, error) {
	return nil, ErrNoForward
}

// Close ends the processes started over the link.
func (l *OpenSSHLink) Close() error {
	l.mu.Lock()
	ps := l.procs
	l.procs, l.closed = nil, true
	l.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
	return nil
}

// Start runs cmd on the remote host, as Client.Start does.
func (l *OpenSSHLink) Start(ctx context.Context, cmd string) (Proc, error) {
	return proc(l.start(ctx, cmd, l.s.opts.Stderr))
}

// StartQuiet is Start with the stderr kept back until ShowStderr, as
// Client.StartQuiet.
func (l *OpenSSHLink) StartQuiet(ctx context.Context, cmd string) (Proc, error) {
	return proc(l.start(ctx, cmd, nil))
}

// Join runs `RELAY --join SOCK`, which relays to the socket: no
// forwarding through COMMAND.
func (l *OpenSSHLink) Join(ctx context.Context, sock, relay string) (io.ReadWriteCloser, bool, error) {
	p, err := l.StartQuiet(ctx, ShellQuote(relay)+" "+wire.CmdJoin+" "+ShellQuote(sock))
	return p, false, err
}

// Keepalive: none through COMMAND (ssh's ServerAliveInterval is its own).
func (l *OpenSSHLink) Keepalive() error { return errNoKeepalive }

func (l *OpenSSHLink) start(ctx context.Context, cmd string, stderr io.Writer) (*ExecSession, error) {
	s := l.s
	argv := s.Command(cmd)
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = s.ask.env(os.Environ())
	sink := &stderrSink{out: stderr, prefix: s.target.Host + ": "}
	c.Stderr = sink
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", s.target.Host, err)
	}
	// A pipe of our own, not StdoutPipe's: Wait (below, as soon as ssh
	// exits) would close that one under a reader still reading what a
	// short command printed, which then failed with a closed pipe.
	stdout, pw, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("ssh %s: %w", s.target.Host, err)
	}
	c.Stdout = pw
	// In bulkmove's process group, as rsync leaves its ssh: an ssh that
	// prompts on the terminal itself (no askpass, or an OpenSSH older than
	// SSH_ASKPASS_REQUIRE) would stop on SIGTTIN in a group of its own.
	err = c.Start()
	pw.Close() // the child's now
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("ssh %s: starting %s: %w", s.target.Host, s.argv[0], err)
	}
	e := &ExecSession{l: l, c: c, cmd: cmd, stdin: stdin, stdout: stdout, stderr: sink, done: make(chan struct{})}
	go func() {
		e.waitErr = c.Wait()
		close(e.done)
	}()
	e.stop = context.AfterFunc(ctx, func() { e.kill() })
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.procs = append(l.procs, e)
	}
	l.mu.Unlock()
	if closed {
		e.Close()
		return nil, fmt.Errorf("ssh %s: %w", s.target.Host, errSessionClosed)
	}
	return e, nil
}

// Output runs a short command and returns its stdout, as Client.Output.
func (l *OpenSSHLink) Output(ctx context.Context, cmd string) ([]byte, error) {
	s, err := l.start(ctx, cmd, nil)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.CloseWrite()
	out, rerr := io.ReadAll(s)
	if err := s.Wait(); err != nil {
		return out, err
	}
	return out, rerr
}

// EnsureAgent is Client.EnsureAgent, its commands run as processes.
func (l *OpenSSHLink) EnsureAgent(ctx context.Context, remotePath, version string, wantProto int, localBinary string) (string, error) {
	return agentbin.Ensure(ctx, execRemote{l}, remotePath, version, wantProto, localBinary)
}

// execRemote is the link as agentbin.Remote: no SFTP (the upload goes
// through cat).
type execRemote struct{ *OpenSSHLink }

func (r execRemote) Start(ctx context.Context, cmd string) (agentbin.Stdin, error) {
	return r.OpenSSHLink.StartQuiet(ctx, cmd)
}

func (r execRemote) ExitStatus(err error) (status int, stderr string, ok bool) {
	return agentRemote{}.ExitStatus(err)
}

// SSH is none: the upload goes through cat.
func (r execRemote) SSH() *ssh.Client { return nil }

func (r execRemote) Note(msg string) { r.s.notes.print(msg) }
func (r execRemote) Warn(msg string) { r.s.notes.warn(msg) }

// ExecSession is a remote command run by an ssh process: reading reads
// its stdout, writing writes its stdin.
type ExecSession struct {
	l      *OpenSSHLink
	c      *exec.Cmd
	cmd    string
	stdin  io.WriteCloser
	stdout *os.File
	stderr *stderrSink
	stop   func() bool

	done      chan struct{} // closed once the process was reaped
	waitErr   error
	once      sync.Once
	err       error
	closeOnce sync.Once
}

func (e *ExecSession) Read(p []byte) (int, error) {
	n, err := e.stdout.Read(p)
	return n, e.pipeErr(err)
}

func (e *ExecSession) Write(p []byte) (int, error) {
	n, err := e.stdin.Write(p)
	return n, e.pipeErr(err)
}

// pipeErr is err of a pipe to the ssh process, named as a closed
// connection's where the pipe was closed (Close, or the job's end), so
// that the stream counts as lost, not failed: it is opened again.
func (e *ExecSession) pipeErr(err error) error {
	if errors.Is(err, os.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("ssh %s: %w", e.l.s.target.Host, io.ErrClosedPipe)
	}
	return err
}

// CloseWrite closes the command's stdin (it reads EOF).
func (e *ExecSession) CloseWrite() error { return e.stdin.Close() }

// ShowStderr forwards the command's stderr from now on.
func (e *ExecSession) ShowStderr() {
	e.stderr.mu.Lock()
	e.stderr.out = e.l.s.opts.Stderr
	e.stderr.mu.Unlock()
}

// Close ends the session without waiting for the remote command: its
// stdin reads EOF after what was written to it (ssh still carries that:
// killing ssh at once could drop the last bytes, a stream's summary), and
// reads end at once. An ssh still running closeGrace later is ended
// (kill).
func (e *ExecSession) Close() error {
	e.closeOnce.Do(func() {
		e.stdin.Close()
		// Reads end at once; the pipe is ours to close (Wait does not).
		e.stdout.SetReadDeadline(time.Unix(1, 0))
		e.stdout.Close()
		go func() {
			select {
			case <-e.done:
			case <-time.After(closeGrace):
				e.kill()
			}
		}()
	})
	return nil
}

// closeGrace is how long a closed session's ssh has to deliver what was
// written and end.
const closeGrace = 10 * time.Second

// kill ends the ssh process: SIGTERM (ssh then closes its connection, and
// sshd hangs up on the command), SIGKILL if that has not ended it soon.
func (e *ExecSession) kill() {
	select {
	case <-e.done:
		return
	default:
	}
	_ = e.c.Process.Signal(syscall.SIGTERM)
	go func() {
		select {
		case <-e.done:
		case <-time.After(2 * time.Second):
			_ = e.c.Process.Kill()
		}
	}()
}

// Wait waits for the process: the remote command's non-zero exit is an
// *ExitError; ssh's own failure (status 255) an error quoting what it
// said, which matches ErrAuth or ErrHostKeyUnknown where it says so.
func (e *ExecSession) Wait() error {
	e.once.Do(func() {
		<-e.done
		e.stop()
		e.stderr.flush()
		e.err = e.l.s.exitError(e.cmd, e.waitErr, e.stderr.Tail())
	})
	return e.err
}

// exitError reads an ssh process's end.
func (s *OpenSSH) exitError(cmd string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	host := s.target.Host
	var xe *exec.ExitError
	if !errors.As(err, &xe) {
		return fmt.Errorf("ssh %s: %s: %w", host, s.argv[0], err)
	}
	st, _ := xe.Sys().(syscall.WaitStatus)
	switch {
	case st.Signaled():
		return fmt.Errorf("ssh %s: %s %q was killed by signal %s", host, s.argv[0], shortCmd(cmd), st.Signal())
	case st.ExitStatus() == 255:
		// ssh's own failure (or the remote command's 255, which bulkmove's
		// never is).
		why := shell.LastLines(stderr, 3)
		if why == "" {
			why = "it exited with status 255"
		}
		err := fmt.Errorf("ssh %s: %s: %s", host, strings.Join(s.argv, " "), why)
		switch {
		case strings.Contains(stderr, "Permission denied"), strings.Contains(stderr, "Too many authentication failures"):
			return &kindError{kind: ErrAuth, msg: err.Error()}
		case strings.Contains(stderr, "REMOTE HOST IDENTIFICATION HAS CHANGED"):
			return &kindError{kind: ErrHostKeyChanged, msg: err.Error()}
		case strings.Contains(stderr, "Host key verification failed"):
			return &kindError{kind: ErrHostKeyUnknown, msg: err.Error()}
		}
		return err
	}
	return &ExitError{Host: host, Cmd: cmd, Status: st.ExitStatus(), Stderr: stderr}
}
