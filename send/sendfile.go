package send

// Sending file bodies with sendfile(2) over a plain TCP stream
// (--transport tcp).
//
// There the tar stream goes to the socket as it is: a body that needs no
// hashing (--no-verify-transfer), no sparse map and no pacing can go from
// the page cache to the socket inside the kernel, without the read into
// this process and the write back out of it. With the end-to-end check on
// (the default) the sender must see every byte to hash it, and over TLS or
// SSH every byte is encrypted here: both read and write as before.

import (
	"bufio"
	"errors"
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/zerocopy"
	"github.com/bulkmove/bulkmove/send/source"
)

// sendfileMin is the smallest body sent with sendfile: each one costs a
// flush of the stream's buffer and a call of its own, which for small files
// cost more than the copy they spare.
var sendfileMin int64 = 64 << 10

// bodySender is the writer a plain batch goes to over a TCP connection:
// the stream's buffer, and the socket under it for whole bodies (a
// source.FileSender).
type bodySender struct {
	*bufio.Writer
	c *Client
}

// tarWriter returns the writer for a plain batch's tar stream: c.w, or a
// bodySender when bodies may go by sendfile (a TCP connection, no hashing,
// no --bwlimit).
func (c *Client) tarWriter(hash bool) io.Writer {
	if c.raw == nil || hash || c.limit.Load().Rate() > 0 {
		return c.w
	}
	return bodySender{c.w, c}
}

// SendFileMin implements source.FileSender.
func (bodySender) SendFileMin() int64 { return sendfileMin }

// SendFile implements source.FileSender: it sends n bytes of the file fd
// from its offset, the buffered bytes before them first. A short count
// with no error: the file ended early. rerr is a failure reading the
// file, werr one of the connection.
func (b bodySender) SendFile(fd int, n int64) (sent int64, rerr, werr error) {
	if err := b.Flush(); err != nil {
		return 0, nil, err
	}
	c := b.c
	ctr := c.ctr.Load()
	start := time.Now()
	defer func() {
		if ctr != nil {
			ctr.SendNanos.Add(int64(time.Since(start)))
		}
	}()
	for sent < n {
		var m int
		var serr error
		err := c.raw.Write(func(s uintptr) bool {
			m, serr = unix.Sendfile(int(s), fd, nil, int(min(n-sent, 4<<20)))
			return serr != unix.EAGAIN
		})
		if m > 0 {
			sent += int64(m)
			c.sent.N += int64(m)
			if ctr != nil {
				ctr.WireBytes.Add(int64(m))
				ctr.SendfileBytes.Add(int64(m))
			}
			c.activity.Store(time.Now().UnixNano())
		}
		switch {
		case err != nil:
			return sent, nil, err
		case serr == unix.EINTR:
		case sent == 0 && zerocopy.Unsupported(serr):
			return 0, source.ErrNoSendfile, nil
		case serr != nil:
			if connErr(serr) {
				return sent, nil, serr
			}
			return sent, serr, nil
		case m == 0:
			return sent, nil, nil // the file ended
		}
	}
	return sent, nil, nil
}

// connErr says whether sendfile's error errno is the connection's (it
// does not say which side failed).
func connErr(errno error) bool {
	var e syscall.Errno
	if !errors.As(errno, &e) {
		return true
	}
	switch e {
	case unix.EPIPE, unix.ECONNRESET, unix.ENOTCONN, unix.ETIMEDOUT, unix.ECONNABORTED,
		unix.EHOSTUNREACH, unix.ENETUNREACH, unix.ENETDOWN, unix.ESHUTDOWN, unix.EBADF:
		return true
	}
	return false
}
