package sshx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/bulkmove/bulkmove/internal/shell"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/wire"
)

// Session is a remote command started by Client.Start: reading reads its
// stdout, writing writes its stdin.
type Session struct {
	c       *Client
	s       *ssh.Session
	cmd     string
	stdin   io.WriteCloser
	stdout  io.Reader
	stderr  *stderrSink
	stopCtx func() bool
	ctx     context.Context
	closed  chan struct{}
	closeMu sync.Once

	waitOnce sync.Once
	waitErr  error
}

// Start starts cmd on the remote (through the remote user's shell, like
// ssh host cmd). Its stdout and stdin are the Session's Read and Write; its
// stderr goes to Options.Stderr, each line prefixed with "HOST: ", and its
// last lines are kept for Wait's error. When ctx ends, the command is sent
// SIGKILL and the session closed.
func (c *Client) Start(ctx context.Context, cmd string) (*Session, error) {
	return c.start(ctx, cmd, c.stderr)
}

// StartQuiet is Start, but the command's stderr is only kept (for Wait's
// error) until ShowStderr is called: for a command that may fail in an
// expected way, such as a first attempt.
func (c *Client) StartQuiet(ctx context.Context, cmd string) (*Session, error) {
	return c.start(ctx, cmd, nil)
}

// ShowStderr forwards the command's stderr from now on.
func (s *Session) ShowStderr() {
	s.stderr.mu.Lock()
	s.stderr.out = s.c.stderr
	s.stderr.mu.Unlock()
}

func (c *Client) start(ctx context.Context, cmd string, stderr io.Writer) (*Session, error) {
	return c.startWith(ctx, cmd, stderr, c.alias+": ", nil)
}

// startWith is start, with its stderr's lines prefixed with prefix, and
// setup (if set) run on the session before the command starts.
func (c *Client) startWith(ctx context.Context, cmd string, stderr io.Writer, prefix string, setup func(*ssh.Session) error) (*Session, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: opening a session: %w", c.alias, err)
	}
	if setup != nil {
		if err := setup(s); err != nil {
			s.Close()
			return nil, fmt.Errorf("ssh %s: %w", c.alias, err)
		}
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("ssh %s: %w", c.alias, err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("ssh %s: %w", c.alias, err)
	}
	sink := &stderrSink{out: stderr, prefix: prefix}
	s.Stderr = sink
	if err := s.Start(cmd); err != nil {
		s.Close()
		return nil, fmt.Errorf("ssh %s: starting %q: %w", c.alias, shortCmd(cmd), err)
	}
	sess := &Session{c: c, s: s, cmd: cmd, stdin: stdin, stdout: stdout, stderr: sink, ctx: ctx, closed: make(chan struct{})}
	sess.stopCtx = context.AfterFunc(ctx, func() {
		// sshd ignores signals for root logins (no privilege separation
		// after authentication): closing the channel is what reliably ends
		// the command, which then reads EOF on stdin.
		_ = s.Signal(ssh.SIGKILL)
		_ = s.Close()
	})
	return sess, nil
}

// Join opens a stream to the Unix socket sock on the remote host: a
// channel that sshd connects to it itself (direct-streamlocal, as ssh -L
// does: no remote process, no login shell), or, where sshd does not allow
// that (AllowStreamLocalForwarding no), a session running
// `RELAY --join SOCK`, which relays its stdin and stdout to the socket.
// forwarded says which.
func (c *Client) Join(ctx context.Context, sock, relay string) (rw io.ReadWriteCloser, forwarded bool, err error) {
	rw, ferr := c.Forward(ctx, sock)
	if ferr == nil {
		return rw, true, nil
	}
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	// Quiet: a relay that cannot reach the socket says so on stderr, which
	// the caller's error then quotes; a working one says nothing.
	s, err := c.StartQuiet(ctx, ShellQuote(relay)+" "+wire.CmdJoin+" "+ShellQuote(sock))
	if err != nil {
		return nil, false, fmt.Errorf("%w (and %v)", err, ferr)
	}
	return s, false, nil
}

// Forward opens a stream to the Unix socket sock on the remote host,
// through sshd's forwarding only (direct-streamlocal): no remote process.
// The stream is closed when ctx ends.
func (c *Client) Forward(ctx context.Context, sock string) (io.ReadWriteCloser, error) {
	conn, err := c.ssh.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: forwarding to %s: %w", c.alias, sock, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	return &joined{Conn: conn, stop: stop}, nil
}

// joined is a forwarded stream, closed when the context of Join ends.
type joined struct {
	net.Conn
	stop func() bool
}

func (j *joined) Close() error {
	j.stop()
	return j.Conn.Close()
}

// Read reads the remote command's stdout.
func (s *Session) Read(p []byte) (int, error) { return s.stdout.Read(p) }

// Write writes to the remote command's stdin.
func (s *Session) Write(p []byte) (int, error) { return s.stdin.Write(p) }

// CloseWrite closes the remote command's stdin (it reads EOF).
func (s *Session) CloseWrite() error { return s.stdin.Close() }

// Close closes the session without waiting for the command (which sshd
// then hangs up on).
func (s *Session) Close() error {
	s.stopCtx()
	s.closeMu.Do(func() { close(s.closed) })
	err := s.s.Close()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// Wait waits for the remote command to exit. A non-zero exit is an
// *ExitError; a connection lost before the command reported its status is
// an error saying so.
func (s *Session) Wait() error {
	s.waitOnce.Do(func() {
		done := make(chan error, 1)
		go func() { done <- s.s.Wait() }()
		var err error
		exited := false
		select {
		case err = <-done:
			exited = true
		case <-s.ctx.Done():
		case <-s.closed:
		}
		if !exited {
			select {
			case err = <-done:
			default:
				// The channel is closed, but sshd confirms that only once
				// the command has exited; do not wait for that.
				s.stderr.flush()
				why := error(errSessionClosed)
				if s.ctx.Err() != nil {
					why = context.Cause(s.ctx)
				}
				s.waitErr = fmt.Errorf("ssh %s: remote command %q: %w", s.c.alias, shortCmd(s.cmd), why)
				return
			}
		}
		s.stopCtx()
		s.stderr.flush()
		s.waitErr = s.c.commandError(s.cmd, err, s.stderr.Tail())
	})
	return s.waitErr
}

// Output runs a short command and returns its stdout. Its stderr is not
// shown but is quoted in the error if the command fails.
func (c *Client) Output(ctx context.Context, cmd string) ([]byte, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: opening a session: %w", c.alias, err)
	}
	defer s.Close()
	var out bytes.Buffer
	errb := &stderrSink{}
	s.Stdout, s.Stderr = &out, errb
	if err := s.Start(cmd); err != nil {
		return nil, fmt.Errorf("ssh %s: starting %q: %w", c.alias, shortCmd(cmd), err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGKILL)
		_ = s.Close()
		return nil, fmt.Errorf("ssh %s: remote command %q: %w", c.alias, shortCmd(cmd), context.Cause(ctx))
	}
	if err != nil {
		return out.Bytes(), c.commandError(cmd, err, errb.Tail())
	}
	return out.Bytes(), nil
}

var errSessionClosed = errors.New("session closed before the command exited")

// ExitError is a remote command's failure.
type ExitError struct {
	Host   string
	Cmd    string
	Status int    // exit status; -1 if killed by a signal
	Signal string // the signal, if any
	Stderr string // the last lines of its stderr
	Err    *ssh.ExitError
}

func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ssh %s: remote command %q ", e.Host, shortCmd(e.Cmd))
	if e.Signal != "" {
		fmt.Fprintf(&b, "was killed by signal %s", e.Signal)
	} else {
		fmt.Fprintf(&b, "exited with status %d", e.Status)
	}
	if t := shell.LastLines(e.Stderr, 3); t != "" {
		b.WriteString(": " + t)
	}
	return b.String()
}

func (e *ExitError) Unwrap() error {
	if e.Err == nil { // an ssh process's exit (OpenSSH)
		return nil
	}
	return e.Err
}

func (c *Client) commandError(cmd string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		x := &ExitError{Host: c.alias, Cmd: cmd, Status: ee.ExitStatus(), Signal: ee.Signal(), Stderr: stderr, Err: ee}
		if x.Signal != "" {
			x.Status = -1
		}
		return x
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) || errors.Is(err, io.EOF) {
		why := "the connection was lost before it reported an exit status"
		if c.keepaliveDead.Load() {
			why = "the connection was closed after the server stopped answering keepalives"
		}
		if t := shell.LastLines(stderr, 3); t != "" {
			why += ": " + t
		}
		return fmt.Errorf("ssh %s: remote command %q: %s: %w", c.alias, shortCmd(cmd), why, err)
	}
	return fmt.Errorf("ssh %s: remote command %q: %w", c.alias, shortCmd(cmd), err)
}

// shortCmd shortens a command (EnsureAgent's scripts) for error messages.
func shortCmd(cmd string) string {
	const max = 80
	if len(cmd) <= max {
		return cmd
	}
	return cmd[:max-3] + "..."
}

// stderrMu keeps lines from several sessions whole on a shared Stderr.
var stderrMu sync.Mutex

const stderrTail = 4096

// stderrSink forwards a remote stderr line by line (if out is set) and keeps
// its last bytes.
type stderrSink struct {
	out    io.Writer
	prefix string
	mu     sync.Mutex
	line   []byte
	tail   []byte
}

func (s *stderrSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tail = append(s.tail, p...)
	if len(s.tail) > 2*stderrTail {
		s.tail = append([]byte(nil), s.tail[len(s.tail)-stderrTail:]...)
	}
	if s.out == nil {
		return len(p), nil
	}
	s.line = append(s.line, p...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		s.emit(s.line[:i+1])
		s.line = s.line[i+1:]
	}
	if len(s.line) > stderrTail {
		s.emit(append(s.line, '\n'))
		s.line = nil
	}
	return len(p), nil
}

// emit writes one line (ending in '\n') to out. The remote host chose
// these bytes: control characters and invalid UTF-8 are escaped, so that
// the remote side cannot write escape sequences to the user's terminal.
// Backslashes are kept: a remote bulkmove escaped its names already.
func (s *stderrSink) emit(line []byte) {
	text := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
	stderrMu.Lock()
	defer stderrMu.Unlock()
	_, _ = io.WriteString(s.out, s.prefix+termsafe.Sanitize(text)+"\n")
}

func (s *stderrSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out != nil && len(s.line) > 0 {
		s.emit(append(s.line, '\n'))
		s.line = nil
	}
}

// Tail returns the last bytes written (up to a few KiB).
func (s *stderrSink) Tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tail
	if len(t) > stderrTail {
		t = t[len(t)-stderrTail:]
	}
	return string(t)
}
