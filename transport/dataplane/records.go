package dataplane

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// crypto/tls writes every record, at most 16 KiB of data, with a system
// call of its own, and on a connection with TCP_NODELAY (Go's default)
// each becomes a segment of its own; it reads a record's bytes with as
// many reads as it takes. A sender flushes 256 KiB at a time: sealed one
// record after another into one buffer and written with one write, they
// cost one system call and leave in full-sized segments, and the far end
// reads them in a few large reads instead of one or two a record.

// maxHeld bounds what a stream holds before it writes even in the middle
// of a Write (a Write larger than the sender's flush).
const maxHeld = 512 << 10

// recordConn is the TCP connection under a TLS stream: while held, the
// records written to it are kept and written together at release.
type recordConn struct {
	net.Conn
	r *bufio.Reader // reads through it, if not nil

	mu    sync.Mutex
	held  int // Writes of the stream in progress
	buf   []byte
	err   error // a failed write of held records: every later one fails
	calls int   // write system calls made, for tests
}

func (c *recordConn) Read(p []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.held == 0 {
		c.calls++
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= maxHeld {
		if err := c.writeHeld(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeHeld writes the held records (c.mu held).
func (c *recordConn) writeHeld() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.calls++
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	if err != nil {
		c.err = err
	}
	return err
}

func (c *recordConn) hold() {
	c.mu.Lock()
	c.held++
	c.mu.Unlock()
}

// release ends a hold; the last one writes what it kept.
func (c *recordConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held--; c.held > 0 {
		return c.err
	}
	if err := c.writeHeld(); err != nil {
		return err
	}
	return c.err
}

// writeCalls is how many write system calls the connection made.
func (c *recordConn) writeCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// tlsStream is a TLS connection over a recordConn: each Write's records
// go out together.
type tlsStream struct {
	*tls.Conn
	rc     *recordConn
	shaken atomic.Bool // the handshake is done
}

func (s *tlsStream) Write(p []byte) (int, error) {
	if !s.shaken.Load() {
		// The handshake's messages wait for answers: never held.
		if err := s.Conn.Handshake(); err != nil {
			return 0, err
		}
		s.shaken.Store(true)
	}
	s.rc.hold()
	n, err := s.Conn.Write(p)
	if rerr := s.rc.release(); err == nil && rerr != nil {
		err = rerr
	}
	return n, err
}

// readBuf is what a stream's receiving end reads from the socket at a time.
const readBuf = 256 << 10

// tlsClient is tls.Client over c, its records written together.
func tlsClient(c net.Conn, cfg *tls.Config) *tlsStream {
	rc := &recordConn{Conn: c}
	return &tlsStream{Conn: tls.Client(rc, cfg), rc: rc}
}

// tlsServer is tls.Server over c, read in large reads, its records
// written together.
func tlsServer(c net.Conn, cfg *tls.Config) *tlsStream {
	rc := &recordConn{Conn: c, r: bufio.NewReaderSize(c, readBuf)}
	return &tlsStream{Conn: tls.Server(rc, cfg), rc: rc}
}

// Server is tls.Server over c, its socket read in large reads: the
// receiving end of a stream that answers with little (bulkmove serve's).
func Server(c net.Conn, cfg *tls.Config) *tls.Conn {
	return tls.Server(&recordConn{Conn: c, r: bufio.NewReaderSize(c, readBuf)}, cfg)
}
