package agentbin

import (
	"context"
	"errors"
	"io"

	"golang.org/x/crypto/ssh"
)

// Remote is the SSH connection Ensure runs its commands over. sshx.Client
// provides one (sshx.Client.EnsureAgent); the methods are what the
// search, the checks and the upload need of it, no more.
type Remote interface {
	// Host names the remote in messages, as in "ssh HOST: ...".
	Host() string
	// Output runs a short command and returns its stdout; its stderr is
	// not shown. A command that exits non-zero returns its stdout and an
	// error that ExitStatus reads.
	Output(ctx context.Context, cmd string) ([]byte, error)
	// ExitStatus reports whether err is a command's non-zero exit, with
	// its status and the last lines of its stderr.
	ExitStatus(err error) (status int, stderr string, ok bool)
	// Start starts cmd and returns its stdin, for an upload through cat
	// where the server has no SFTP.
	Start(ctx context.Context, cmd string) (Stdin, error)
	// SSH is the connection itself, for an SFTP session; nil where there
	// is none to be had (the upload then goes through cat).
	SSH() *ssh.Client
	// Note prints a notice for the user, and Warn a warning (each once
	// for the connections of one dial).
	Note(msg string)
	Warn(msg string)
}

// Stdin is a remote command started by Remote.Start: writing writes its
// stdin.
type Stdin interface {
	io.Writer
	// CloseWrite closes its stdin (it reads EOF).
	CloseWrite() error
	// Close ends the session without waiting for the command.
	Close() error
	// Wait waits for the command to exit; a non-zero exit is an error.
	Wait() error
}

// Sentinel errors; match them with errors.Is. sshx.IsPermanent counts
// each as one that retrying the connection will not fix.
var (
	// ErrProtocol: the remote bulkmove speaks another protocol version.
	ErrProtocol = errors.New("protocol version mismatch")
	// ErrUnsupportedRemote: the remote has no usable bulkmove and cannot run
	// this one (another OS or architecture).
	ErrUnsupportedRemote = errors.New("no usable bulkmove on the remote")
	// ErrUnsafeCache: the remote's agent cache (~/.cache/bulkmove and the
	// directories above it up to the home) could be written by someone
	// else than the user: a symbolic link, another owner, or group or
	// other write permission that bulkmove may not repair.
	ErrUnsafeCache = errors.New("unsafe agent cache on the remote")
)

// kindError is an error with its own message that matches a sentinel.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Unwrap() error { return e.kind }
