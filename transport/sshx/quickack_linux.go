package sshx

import (
	"net"
	"syscall"
	"time"

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

// kernelRTT is the smallest round trip the kernel has seen on c's TCP
// connection (TCP_INFO's min_rtt: the handshake's SYN and SYN-ACK give
// one that no delayed acknowledgement stretched, where the smoothed RTT of
// a fresh connection reads milliseconds over a link of microseconds), or
// false for a connection that is not a socket of this host (a jump
// host's channel, a ProxyCommand). (It lives here with quickAck, the
// other reader of this package's TCP sockets.)
func kernelRTT(c net.Conn) (time.Duration, bool) {
	var rc syscall.RawConn
	switch t := c.(type) {
	case *quickAck:
		rc = t.rc
	case *net.TCPConn:
		var err error
		if rc, err = t.SyscallConn(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	var info *unix.TCPInfo
	var err error
	if cerr := rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); cerr != nil || err != nil {
		return 0, false
	}
	us := info.Min_rtt
	if us == 0 {
		us = info.Rtt
	}
	if us == 0 {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}
