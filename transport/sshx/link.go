package sshx

import (
	"context"
	"errors"
	"io"
	"time"
)

// Link is one connection to the remote host, as the transports use it:
// the built-in client's SSH connection (Client), or the ssh processes of
// the system's OpenSSH (-e, OpenSSHLink). What runs over it is the same
// either way: the agent started, the streams that join it, redial, -j
// auto.
type Link interface {
	Host() string     // the host as given, for messages
	HostName() string // its real name, for the data plane
	Endpoint() string // the account, for a lingering agent's record
	// PathRTT is the kernel's round trip on the connection, if known.
	PathRTT() (time.Duration, bool)
	// Start runs a remote command, its stderr shown (prefixed with the
	// host); StartQuiet keeps it back until the Proc's ShowStderr.
	Start(ctx context.Context, cmd string) (Proc, error)
	StartQuiet(ctx context.Context, cmd string) (Proc, error)
	// Output runs a short command and returns its stdout.
	Output(ctx context.Context, cmd string) ([]byte, error)
	// Forward opens a stream to a Unix socket on the host without a
	// remote process (an error where that cannot be done); Join does,
	// else relays through `RELAY --join SOCK`.
	Forward(ctx context.Context, sock string) (io.ReadWriteCloser, error)
	Join(ctx context.Context, sock, relay string) (rw io.ReadWriteCloser, forwarded bool, err error)
	EnsureAgent(ctx context.Context, remotePath, version string, wantProto int, localBinary string) (string, error)
	// Keepalive is one round trip over the connection (an error where
	// there is none to make).
	Keepalive() error
	Close() error
}

// Proc is a remote command started over a Link: reading reads its
// stdout, writing writes its stdin.
type Proc interface {
	io.ReadWriteCloser
	CloseWrite() error
	Wait() error
	ShowStderr()
}

// Linker opens a job's links.
type Linker interface {
	// DialN opens n links, as the package's DialN.
	DialN(ctx context.Context, n int) ([]Link, []error, error)
	// DialFirst is DialN returning the first link up at once, as the
	// package's DialFirst.
	DialFirst(ctx context.Context, n int) (Link, func() ([]Link, []error), error)
}

// Builtin is the built-in client's Linker: t reached with o.
func Builtin(t Target, o Options) Linker { return builtin{t, o} }

type builtin struct {
	target  Target
	options Options
}

func (b builtin) DialN(ctx context.Context, n int) ([]Link, []error, error) {
	cs, errs, err := DialN(ctx, b.target, b.options, n)
	return clientLinks(cs), errs, err
}

func (b builtin) DialFirst(ctx context.Context, n int) (Link, func() ([]Link, []error), error) {
	first, rest, err := DialFirst(ctx, b.target, b.options, n)
	if err != nil {
		return nil, nil, err
	}
	return clientLink{first}, func() ([]Link, []error) {
		cs, errs := rest()
		return clientLinks(cs), errs
	}, nil
}

func clientLinks(cs []*Client) []Link {
	ls := make([]Link, len(cs))
	for i, c := range cs {
		ls[i] = clientLink{c}
	}
	return ls
}

// clientLink is a Client as a Link.
type clientLink struct{ *Client }

func (c clientLink) Start(ctx context.Context, cmd string) (Proc, error) {
	return proc(c.Client.Start(ctx, cmd))
}

func (c clientLink) StartQuiet(ctx context.Context, cmd string) (Proc, error) {
	return proc(c.Client.StartQuiet(ctx, cmd))
}

func (c clientLink) Keepalive() error {
	_, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil)
	return err
}

// proc is s as a Proc, nil (not a nil *Session) on an error.
func proc[S Proc](s S, err error) (Proc, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// DialN implements Linker: n links, each of which logs in with its first
// command (so none fails here).
func (s *OpenSSH) DialN(_ context.Context, n int) ([]Link, []error, error) {
	ls := make([]Link, n)
	for i := range ls {
		ls[i] = s.Link()
	}
	return ls, nil, nil
}

// DialFirst implements Linker.
func (s *OpenSSH) DialFirst(ctx context.Context, n int) (Link, func() ([]Link, []error), error) {
	ls, _, _ := s.DialN(ctx, n)
	return ls[0], func() ([]Link, []error) { return ls[1:], nil }, nil
}

// errNoKeepalive: ssh's own keepalives are its business.
var errNoKeepalive = errors.New("no keepalive through -e")
