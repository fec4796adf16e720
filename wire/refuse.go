package wire

import (
	"bufio"
	"errors"
	"io"
)

// RefusedError is a receiver's refusal of a stream at its handshake (a
// wrong token, an unknown root, a destination it will not open or any
// other reason), with the reason it gave. The receiver would refuse again:
// it is permanent (a sender does not retry it), the sender stops and shows
// the reason.
type RefusedError struct {
	By     string // who refused, for messages ("serve HOST"); "" if not known
	Reason string
	err    error // the receiver's own error, on the receiving side
}

func (e *RefusedError) Error() string {
	if e.By == "" {
		return "refused: " + e.Reason
	}
	return e.By + " refused: " + e.Reason
}

func (e *RefusedError) Permanent() bool { return true }
func (e *RefusedError) Unwrap() error   { return e.err }

// Refuse answers a stream's handshake with a refusal: a Fail frame in
// place of the receiver's Hello, carrying err's message as the reason.
// The sender's Dial returns it as a RefusedError (a sender that predates
// it reports the same frame as the receiver's error). It returns the
// refusal, which wraps err.
func Refuse(w io.Writer, err error) error {
	bw := bufio.NewWriter(w)
	WriteFrame(bw, Fail, []byte(err.Error()))
	bw.Flush()
	return &RefusedError{Reason: err.Error(), err: err}
}

// RefusedBy returns err, if it holds a refusal, as that refusal alone and
// naming who refused ("serve HOST refused: REASON": the reason as the
// receiver gave it, once, without the stream's name around it); else err.
func RefusedBy(who string, err error) error {
	var r *RefusedError
	if !errors.As(err, &r) {
		return err
	}
	return &RefusedError{By: who, Reason: r.Reason, err: r.err}
}

// IsRefused reports whether err holds a refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
