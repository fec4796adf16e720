package send

import (
	"bufio"
	"io"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/send/source"
)

// TestSendFileUnsupported: a descriptor sendfile cannot read from (here a
// socket; on some filesystems a file) sends nothing and says so, so that
// the body goes by read and write instead (writeTar), rather than
// failing the file.
func TestSendFileUnsupported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{}
	c.sent.W = conn
	c.w = bufio.NewWriter(&c.sent)
	if c.raw, err = conn.(*net.TCPConn).SyscallConn(); err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	unix.Write(fds[1], []byte("not a file"))
	c.w.WriteString("header")
	sent, rerr, werr := bodySender{c.w, c}.SendFile(fds[0], 10)
	if sent != 0 || rerr != source.ErrNoSendfile || werr != nil {
		t.Fatalf("SendFile = %d, %v, %v; want 0 and source.ErrNoSendfile", sent, rerr, werr)
	}
	conn.Close()
	if n := <-got; n != int64(len("header")) {
		t.Errorf("the connection got %d bytes, want the buffered header's %d", n, len("header"))
	}
}
