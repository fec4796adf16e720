package send_test

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/compress"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// textTree writes n text-like files of about size bytes each (log lines:
// compressible, as source code and logs are, but not trivially).
func textTree(t *testing.T, dir string, n, size int) {
	t.Helper()
	words := strings.Fields("the quick brown fox jumps over a lazy dog while request served status ok error retry " +
		"connection user id time latency bytes path GET POST handler cache miss hit")
	for i := range n {
		var b strings.Builder
		x := uint64(i)*0x9e3779b97f4a7c15 + 1
		for line := 0; b.Len() < size; line++ {
			fmt.Fprintf(&b, "2024-01-%02d 12:%02d:%02d.%03d [%d] ", i%28+1, line%60, (line*7)%60, (line*13)%1000, x%97)
			for range 8 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				b.WriteString(words[x%uint64(len(words))])
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d\n", x%100000)
		}
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%10), fmt.Sprintf("f%04d.log", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// compressedAgents is pipeAgent k times with compression set.
func compressedAgents(t *testing.T, ctx context.Context, k int, dst string, src source.Source, c compress.Config, logf func(string, ...any)) []send.Conn {
	conns := make([]send.Conn, k)
	for i := range conns {
		cl := pipeAgent(t, ctx, fmt.Sprintf("stream %d", i), dst, src)
		cl.Compress, cl.Logf = c, logf
		conns[i] = cl
	}
	return conns
}

type totals struct{ sent, wire, in, out int64 }

func sum(p *send.Pool) (s totals) {
	for _, c := range p.Counters {
		s.sent += c.BytesSent.Load()
		s.wire += c.WireBytes.Load()
		s.in += c.CompressIn.Load()
		s.out += c.CompressOut.Load()
	}
	return s
}

// TestCompressRoundTrip: every mode moves a tree of text and of random
// data intact over the wire.
func TestCompressRoundTrip(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []string{"none", "zstd", "zstd:6", "auto"} {
		t.Run(mode, func(t *testing.T) {
			c, err := compress.Parse(mode)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			dir := tmpDir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			if err := gentree.Mixed(filepath.Join(src, "mixed"), 400, 3); err != nil {
				t.Fatal(err)
			}
			textTree(t, filepath.Join(src, "text"), 200, 8<<10)
			p, col := move(t, ctx, src, compressedAgents(t, ctx, 2, dst, source.Source{Root: src}, c, nil), sharder.Options{BatchFiles: 60}, nil)
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
			s := sum(p)
			switch mode {
			case "none":
				if s.in != 0 {
					t.Errorf("compressed %d bytes with --compress none", s.in)
				}
			case "zstd", "zstd:6":
				if s.in == 0 || s.out >= s.in {
					t.Errorf("zstd: %d bytes in, %d out", s.in, s.out)
				}
			}
			t.Logf("%s: files %d bytes, wire %d; compressed %d -> %d", mode, s.sent, s.wire, s.in, s.out)
		})
	}
}

type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *lines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestCompressAuto: on a slow link (the job's bandwidth limit) auto
// compresses text, and says so; it leaves random data plain, and text on
// a link that keeps up (one that takes every write at once: how fast a
// real one is on this machine depends on its load).
func TestCompressAuto(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name string
		rate int64
		text bool
		want bool
	}{
		{"slow link, text", 1 << 20, true, true},
		{"slow link, random data", 1 << 20, false, false},
		{"fast link, text", 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := tmpDir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			if tc.text {
				textTree(t, src, 160, 32<<10)
			} else if err := gentree.Small(src, 48, 4, 32<<10); err != nil {
				t.Fatal(err)
			}
			var log lines
			var conns []send.Conn
			if tc.rate > 0 {
				conns = compressedAgents(t, ctx, 2, dst, source.Source{Root: src}, compress.Config{Mode: compress.Auto}, log.logf)
			} else {
				for i := range 2 {
					c, done := agentVia(t, ctx, fmt.Sprintf("stream %d", i), dst, source.Source{Root: src}, newFastLink)
					t.Cleanup(func() { <-done })
					c.Compress, c.Logf = compress.Config{Mode: compress.Auto}, log.logf
					conns = append(conns, c)
				}
			}
			p, col := moveWith(t, ctx, src, conns, sharder.Options{BatchBytes: 512 << 10}, nil, func(p *send.Pool) {
				if tc.rate > 0 {
					p.Limit = ratelimit.New(tc.rate)
				}
			})
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
			s := sum(p)
			t.Logf("files %d bytes, wire %d; compressed %d -> %d\n%s", s.sent, s.wire, s.in, s.out, log.String())
			if tc.want {
				// The first batch of each stream goes plain, to measure.
				if s.wire > s.sent*6/10 {
					t.Errorf("auto on a slow link: %d bytes on the wire for %d bytes of files", s.wire, s.sent)
				}
				if !strings.Contains(log.String(), "compression on") {
					t.Errorf("no stream said it turned compression on:\n%s", log.String())
				}
			} else if s.in != 0 || s.wire < s.sent {
				t.Errorf("auto compressed %d bytes (wire %d for %d bytes of files), want none", s.in, s.wire, s.sent)
			}
		})
	}
}

// agentVia starts an agent on root in this process and returns a client
// connected to it over pipes, what the client sends passing through via,
// and the agent's result.
func agentVia(t *testing.T, ctx context.Context, name, root string, src source.Source, via func(io.Writer) io.Writer) (*send.Client, <-chan error) {
	t.Helper()
	toAgentW, fromAgentR, done := serveOverPipes(ctx, root)
	t.Cleanup(func() { toAgentW.Close() })
	w, cl := via(toAgentW), closers{toAgentW, fromAgentR}
	if c, ok := w.(io.Closer); ok {
		cl[0] = c // it closes toAgentW once what it holds is through
	}
	c, err := send.Dial(ctx, name, fromAgentR, w, cl, "test",
		wire.ReceiveOptions{Owner: os.Geteuid() == 0, Check: "quick"}, src)
	if err != nil {
		t.Fatal(err)
	}
	return c, done
}

// fastLink is a link that takes every write at once, queueing what the
// receiver has not read yet. Its copies come from linkBufs, so a write
// costs a copy and no allocation: while the queue grows behind a receiver
// short of CPU (a loaded CI), a writer that allocates can pay the garbage
// collector's assists, which count as time blocked in writes, as on a
// slow link.
type fastLink struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*[]byte
	closed bool
	w      io.WriteCloser
}

func newFastLink(w io.Writer) io.Writer {
	f := &fastLink{w: w.(io.WriteCloser)}
	f.cond = sync.NewCond(&f.mu)
	go func() {
		for {
			f.mu.Lock()
			for len(f.queue) == 0 && !f.closed {
				f.cond.Wait()
			}
			q := f.queue
			f.queue = nil
			closed := f.closed
			f.mu.Unlock()
			for _, b := range q {
				if _, err := f.w.Write(*b); err != nil {
					return
				}
				linkBufs.Put(b)
			}
			if closed && len(q) == 0 {
				f.w.Close()
				return
			}
		}
	}()
	return f
}

var linkBufs = sync.Pool{New: func() any { return new([]byte) }}

func (f *fastLink) Write(p []byte) (int, error) {
	b := linkBufs.Get().(*[]byte)
	*b = append((*b)[:0], p...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, b)
	f.cond.Signal()
	return len(p), nil
}

func (f *fastLink) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.cond.Signal()
	return nil
}

// offsetFlipper relays bytes and flips the one at offset at, once.
type offsetFlipper struct {
	w   io.Writer
	at  int64
	off int64
}

func (f *offsetFlipper) Write(p []byte) (int, error) {
	if i := f.at - f.off; i >= 0 && i < int64(len(p)) {
		q := append([]byte(nil), p...)
		q[i] ^= 0x20
		p = q
	}
	f.off += int64(len(p))
	return f.w.Write(p)
}

// TestCompressCorruptInTransit: a byte damaged on the way inside
// compressed data stops that stream (nothing of the batch lands) with an
// error that a new connection may cure; the other stream carries the
// batch, and the tree arrives intact.
func TestCompressCorruptInTransit(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	textTree(t, src, 64, 32<<10)
	zstd := compress.Config{Mode: compress.Zstd}

	bad, done := agentVia(t, ctx, "bad stream", dst, source.Source{Root: src}, func(w io.Writer) io.Writer { return &offsetFlipper{w: w, at: 8 << 10} })
	bad.Compress = zstd
	good := pipeAgent(t, ctx, "good stream", dst, source.Source{Root: src})
	good.Compress = zstd
	var warn warnings
	_, col := moveWith(t, ctx, src, []send.Conn{bad, good}, sharder.Options{BatchFiles: 8}, nil, func(p *send.Pool) { p.OnWarn = warn.add })
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "compressed data corrupt") {
		t.Errorf("the agent of the damaged stream returned %v", err)
	}
	if w := warn.String(); !strings.Contains(w, "bad stream") || !strings.Contains(w, "compressed data corrupt") {
		t.Errorf("warnings do not tell of the damaged stream:\n%s", w)
	}
}

// wireTally reads the stream a client writes (frames, and after each
// compressed batch's Data frame its chunks) and adds up the compressed
// data: the bytes of its chunks on the wire (their headers and the
// terminator too) and what they decompress to.
type wireTally struct {
	w        *io.PipeWriter
	done     chan struct{}
	in, out  int64
	batches  int
	err      error
	upstream io.Writer
}

func newWireTally(upstream io.Writer) *wireTally {
	r, w := io.Pipe()
	t := &wireTally{w: w, done: make(chan struct{}), upstream: upstream}
	go func() {
		defer close(t.done)
		br := bufio.NewReader(r)
		dec, _ := zstd.NewReader(nil)
		defer dec.Close()
		for {
			typ, payload, err := wire.ReadFrame(br)
			if err != nil {
				if err != io.EOF {
					t.err = err
				}
				io.Copy(io.Discard, r)
				return
			}
			if typ != wire.Data {
				continue
			}
			_, codec, err := wire.DecodeData(payload)
			if err != nil {
				t.err = err
				io.Copy(io.Discard, r)
				return
			}
			if codec == wire.CodecNone {
				// A batch with no file data (directories' attributes):
				// a plain tar, read to its end.
				tr := tar.NewReader(br)
				for {
					h, err := tr.Next()
					if err == io.EOF {
						break
					}
					if err != nil || h.Typeflag == tar.TypeReg && h.Size > 0 {
						t.err = fmt.Errorf("a plain batch with file data (%v)", err)
						io.Copy(io.Discard, r)
						return
					}
				}
				continue
			}
			t.batches++
			var z []byte
			for {
				var h [4]byte
				if _, err := io.ReadFull(br, h[:]); err != nil {
					t.err = err
					return
				}
				n := binary.BigEndian.Uint32(h[:])
				t.out += 4 + int64(n)
				if n == 0 {
					break
				}
				b := make([]byte, n)
				if _, err := io.ReadFull(br, b); err != nil {
					t.err = err
					return
				}
				z = append(z, b...)
			}
			tar, err := dec.DecodeAll(z, nil)
			if err != nil {
				t.err = err
				return
			}
			t.in += int64(len(tar))
		}
	}()
	return t
}

func (t *wireTally) Write(p []byte) (int, error) {
	t.w.Write(p)
	return t.upstream.Write(p)
}

func (t *wireTally) Close() error {
	t.w.Close()
	<-t.done
	return t.upstream.(io.Closer).Close()
}

// TestCompressedFigure: the streams' compressed figures (what the summary
// reports) are exactly the compressed data on the wire, chunk by chunk,
// and the tar it decompresses to: not the batches' other frames.
func TestCompressedFigure(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	textTree(t, src, 64, 16<<10)
	var tallies []*wireTally
	var conns []send.Conn
	for i := range 2 {
		c, done := agentVia(t, ctx, fmt.Sprintf("stream %d", i), dst, source.Source{Root: src}, func(w io.Writer) io.Writer {
			tl := newWireTally(w)
			tallies = append(tallies, tl)
			return tl
		})
		t.Cleanup(func() { <-done })
		c.Compress = compress.Config{Mode: compress.Zstd}
		conns = append(conns, c)
	}
	p, col := moveWith(t, ctx, src, conns, sharder.Options{BatchFiles: 8}, nil, nil)
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	for i, tl := range tallies {
		tl.Close()
		if tl.err != nil {
			t.Fatalf("stream %d: reading its wire: %v", i, tl.err)
		}
		c := p.Counters[i]
		t.Logf("stream %d: %d batches, %d bytes of tar compressed to %d on the wire; counted %d -> %d",
			i, tl.batches, tl.in, tl.out, c.CompressIn.Load(), c.CompressOut.Load())
		if tl.batches == 0 || c.CompressIn.Load() != tl.in || c.CompressOut.Load() != tl.out {
			t.Errorf("stream %d counted %d -> %d compressed, the wire carried %d -> %d (%d batches)",
				i, c.CompressIn.Load(), c.CompressOut.Load(), tl.in, tl.out, tl.batches)
		}
	}
}
