package sshx

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// quickAck turns on TCP_QUICKACK after every read, which Linux clears
// again on its own.
//
// sshd sets TCP_NODELAY only on interactive sessions, so Nagle holds back
// a small packet of its while an earlier one is unacknowledged, and this
// end, with nothing to send, delays that acknowledgement by up to 40 ms.
// The handshake and every channel open (each stream joining the agent)
// are such exchanges: opening a job on a lingering agent waited 36 ms for
// one confirmation.
type quickAck struct {
	*net.TCPConn
	rc syscall.RawConn
}

func withQuickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	q := &quickAck{TCPConn: tc, rc: rc}
	q.ack()
	return q
}

func (q *quickAck) ack() {
	q.rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
}

func (q *quickAck) Read(p []byte) (int, error) {
	n, err := q.TCPConn.Read(p)
	if n > 0 {
		q.ack()
	}
	return n, err
}
