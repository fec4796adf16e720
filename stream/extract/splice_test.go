package extract

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (send net.Conn, recv *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	send, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Close(); c.Close() })
	return send, c.(*net.TCPConn)
}

func socketReader(t *testing.T, c *net.TCPConn) SocketReader {
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return SocketReader{Reader: bufio.NewReaderSize(c, 4096), Raw: raw}
}

// TestSpliceTo: a body lands whole, part of it from the reader's buffer
// and the rest spliced; what follows it stays readable.
func TestSpliceTo(t *testing.T) {
	send, c := tcpPair(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16+7)
	go func() { send.Write([]byte("HEAD")); send.Write(body); send.Write([]byte("TAIL")) }()
	sr := socketReader(t, c)
	head := make([]byte, 4)
	if _, err := io.ReadFull(sr, head); err != nil || string(head) != "HEAD" {
		t.Fatalf("head %q, %v", head, err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "body"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	taken, rerr, werr := sr.SpliceTo(int(f.Fd()), int64(len(body)))
	if taken != int64(len(body)) || rerr != nil || werr != nil {
		t.Fatalf("SpliceTo = %d, %v, %v; want %d", taken, rerr, werr, len(body))
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, body) {
		t.Fatalf("the file holds %d bytes, not the body's %d", len(got), len(body))
	}
	tail := make([]byte, 4)
	if _, err := io.ReadFull(sr, tail); err != nil || string(tail) != "TAIL" {
		t.Fatalf("after the body: %q, %v", tail, err)
	}
}

// TestSpliceToFailures: a stream that ends early is the stream's error; a
// file that cannot be written is the file's, and every byte taken off the
// stream is counted (the caller skips the rest of the body).
func TestSpliceToFailures(t *testing.T) {
	t.Run("stream ends", func(t *testing.T) {
		send, c := tcpPair(t)
		go func() { send.Write(make([]byte, 100<<10)); send.Close() }()
		sr := socketReader(t, c)
		f, _ := os.Create(filepath.Join(t.TempDir(), "body"))
		defer f.Close()
		taken, rerr, werr := sr.SpliceTo(int(f.Fd()), 200<<10)
		if rerr == nil || werr != nil || taken != 100<<10 {
			t.Fatalf("SpliceTo = %d, %v, %v; want 100 KiB and a stream error", taken, rerr, werr)
		}
	})
	t.Run("file fails", func(t *testing.T) {
		send, c := tcpPair(t)
		go func() { send.Write(make([]byte, 300<<10)) }()
		sr := socketReader(t, c)
		f, _ := os.Create(filepath.Join(t.TempDir(), "body"))
		ro, err := os.Open(f.Name()) // read-only: writes fail with EBADF
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		taken, rerr, werr := sr.SpliceTo(int(ro.Fd()), 300<<10)
		if werr == nil || rerr != nil {
			t.Fatalf("SpliceTo = %d, %v, %v; want a write error", taken, rerr, werr)
		}
		if werr != unix.EBADF {
			t.Errorf("write error %v, want EBADF", werr)
		}
		// What was taken, and what is left on the stream, make the body.
		rest, _ := io.ReadAll(io.LimitReader(sr, 300<<10-taken))
		if taken+int64(len(rest)) != 300<<10 {
			t.Errorf("taken %d + left %d, want the body's %d", taken, len(rest), 300<<10)
		}
	})
}
