package extract

import (
	"archive/tar"
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// spliceWhole splices body off sr into f, and checks that f holds it.
func spliceWhole(t *testing.T, sr SocketReader, f *os.File, body []byte) {
	t.Helper()
	taken, rerr, werr := sr.SpliceTo(int(f.Fd()), int64(len(body)))
	if taken != int64(len(body)) || rerr != nil || werr != nil {
		t.Fatalf("SpliceTo = %d, %v, %v; want %d", taken, rerr, werr, len(body))
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, body) {
		t.Fatalf("the file holds %d bytes, not the body's %d", len(got), len(body))
	}
}

// readsNext checks that sr's next bytes are want.
func readsNext(t *testing.T, sr SocketReader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(sr, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// TestSpliceTo: a body lands whole, part of it from the reader's buffer
// and the rest spliced; what follows it stays readable.
func TestSpliceTo(t *testing.T) {
	send, c := tcpPair(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16+7)
	go func() { send.Write([]byte("HEAD")); send.Write(body); send.Write([]byte("TAIL")) }()
	sr := socketReader(t, c)
	readsNext(t, sr, "HEAD")
	f, err := os.Create(filepath.Join(t.TempDir(), "body"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spliceWhole(t, sr, f, body)
	readsNext(t, sr, "TAIL")
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

// TestTarReaderSplices: bodies after a header of the fast path and after
// one archive/tar reads (PAX records) are spliced whole, and the entries
// after them read as usual.
func TestTarReaderSplices(t *testing.T) {
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	long := strings.Repeat("d/", 60) + "long" // over 100 bytes: PAX
	bodies := map[string][]byte{
		"short": bytes.Repeat([]byte("s"), 70<<10+3),
		long:    bytes.Repeat([]byte("l"), 90<<10+5),
		"last":  []byte("the end"),
	}
	for _, name := range []string{"short", long, "last"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(bodies[name])), Mode: 0o644, Format: tar.FormatPAX})
		tw.Write(bodies[name])
	}
	tw.Close()
	send, c := tcpPair(t)
	go send.Write(tarball.Bytes())
	tr := newTarReader(socketReader(t, c))
	dir := t.TempDir()
	for _, name := range []string{"short", long} {
		h, err := tr.Next()
		if err != nil || h.Name != name {
			t.Fatalf("Next = %v, %v; want %q", h, err, name)
		}
		if !canSplice(tr) {
			t.Fatalf("%q: the body cannot be spliced", name)
		}
		f, _ := os.Create(filepath.Join(dir, "f"))
		taken, rerr, werr := tr.SpliceTo(int(f.Fd()), h.Size)
		f.Close()
		if taken != h.Size || rerr != nil || werr != nil {
			t.Fatalf("%q: SpliceTo = %d, %v, %v", name, taken, rerr, werr)
		}
		if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, bodies[name]) {
			t.Fatalf("%q: the file holds %d bytes, not the body's %d", name, len(got), len(bodies[name]))
		}
	}
	h, err := tr.Next()
	if err != nil || h.Name != "last" {
		t.Fatalf("after the spliced bodies: Next = %v, %v", h, err)
	}
	if got, _ := io.ReadAll(tr); string(got) != "the end" {
		t.Fatalf("last body %q", got)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("the end of the archive: %v", err)
	}
}

// TestSpliceToFallback: a file that takes no splice (opened to append:
// EINVAL) gets its body by read and write, whole, and the stream goes on.
func TestSpliceToFallback(t *testing.T) {
	send, c := tcpPair(t)
	body := bytes.Repeat([]byte("fallback"), 40<<10)
	go func() { send.Write(body); send.Write([]byte("NEXT")) }()
	sr := socketReader(t, c)
	name := filepath.Join(t.TempDir(), "body")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spliceWhole(t, sr, f, body)
	readsNext(t, sr, "NEXT")
}

// TestCopyToTakenOnWriteError: when the file fails, copyTo counts every
// byte it took off the stream, written or not, so that the caller skips
// the rest of the body from the right place (it counted only those
// written, and the skip then read into the next entry).
func TestCopyToTakenOnWriteError(t *testing.T) {
	name := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(name) // read-only: writes fail with EBADF
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	const n = 300 << 10
	src := bytes.NewReader(make([]byte, n))
	taken, rerr, werr := copyTo(int(ro.Fd()), src, n, nil)
	if werr == nil || rerr != nil {
		t.Fatalf("copyTo = %d, %v, %v; want a write error", taken, rerr, werr)
	}
	if consumed := int64(n - src.Len()); taken != consumed {
		t.Errorf("copyTo says %d bytes taken, the stream gave %d", taken, consumed)
	}
}
