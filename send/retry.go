package send

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/bulkmove/bulkmove/wire"
)

// Retryable classifies a stream's failure, in one place: true for what a
// new connection may cure (timeouts, resets, a connection closed or cut,
// a stall, a remote agent that died, compressed data that arrived
// damaged), false for what it would only repeat
// (a protocol or version mismatch, a full or read-only destination,
// refused permission, a handshake the receiver refused (wire.RefusedError), an
// authentication or host key failure, which package sshx marks permanent)
// and for cancellation.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var perm interface{ Permanent() bool }
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &perm) && perm.Permanent():
		return false
	case errors.Is(err, wire.ErrVersion), errors.Is(err, wire.ErrProtocol), errors.Is(err, ErrNoSpace),
		errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EROFS),
		errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return false
	case errors.Is(err, ErrStalled), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.ErrClosedPipe), errors.Is(err, net.ErrClosed), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var re *RemoteError
	if errors.As(err, &re) {
		// The agent said why it stops: it would say it again, unless
		// what it got was damaged on the way.
		return strings.Contains(re.Msg, wire.ErrCorrupt.Error())
	}
	// Connections closed under us say so in words (x/crypto/ssh, pipes).
	msg := err.Error()
	for _, s := range []string{"connection closed", "closed by the receiver", "broken pipe", "connection reset", "use of closed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func connName(c Conn) string {
	if cl, ok := c.(*Client); ok {
		return cl.Name
	}
	return "local"
}

type permanent struct{ error }

func (p permanent) Permanent() bool { return true }
func (p permanent) Unwrap() error   { return p.error }

// Permanent marks err as one that retrying will not fix (for Redial
// functions that know better than Retryable).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}
