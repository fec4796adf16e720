package send_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
)

const (
	splitFileSize = 256 << 20
	splitSize     = 16 << 20
)

// bigFile writes a file of size bytes at p whose every 8 bytes say
// where they are (and seed), so that a range landing at the wrong
// offset, or one of another run, shows.
func bigFile(t *testing.T, p string, size int64, seed uint64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for k := 0; k < len(buf); k += 8 {
			binary.LittleEndian.PutUint64(buf[k:], uint64(off+int64(k))*0x9E3779B97F4A7C15^seed)
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-off)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// splitTree makes dir/src holding one large file, big, and names dir/dst.
func splitTree(t *testing.T, seed uint64) (src, dst, big string) {
	t.Helper()
	dir := tmpDir(t)
	src, dst = filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(src, 0o755)
	big = filepath.Join(src, "big")
	bigFile(t, big, splitFileSize, seed)
	return src, dst, big
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	// Chunk by chunk: two whole files of this size, under the race
	// detector, took gigabytes.
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	x, y := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(x)) {
		n, errA := io.ReadFull(fa, x)
		m, errB := io.ReadFull(fb, y)
		if n != m || !bytes.Equal(x[:n], y[:m]) {
			t.Fatalf("%s differs from %s near offset %d", b, a, off)
		}
		if errA != nil || errB != nil {
			if (errA == nil) != (errB == nil) {
				t.Fatalf("%s and %s differ in length", a, b)
			}
			return
		}
	}
}

// TestSplitLargeFile: a tree of one large file, split, goes over every
// stream (each its own receiver on the wire, as K agent processes are),
// lands identical, and leaves no partial behind.
func TestSplitLargeFile(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tr := range transports[:2] { // local, wire
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			src, dst, _ := splitTree(t, 1)
			p, col := move(t, ctx, src, tr.open(t, ctx, 4, dst, source.Source{Root: src}), sharder.Options{SplitSize: splitSize}, nil)
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			sameFile(t, filepath.Join(src, "big"), filepath.Join(dst, "big"))
			noTemps(t, dst)
			var total int64
			for i, c := range p.Counters[:4] {
				n := c.BytesSent.Load()
				if n == 0 {
					t.Errorf("stream %d carried no range", i)
				}
				total += n
			}
			if total != splitFileSize {
				t.Errorf("streams carried %d bytes, want %d", total, splitFileSize)
			}
		})
	}
}

// cutWriter breaks its stream after left bytes: a connection killed in
// the middle of a range.
type cutWriter struct {
	w    io.WriteCloser
	left int64
	cut  atomic.Bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.left <= 0 {
		if !c.cut.Swap(true) {
			c.w.Close()
		}
		return 0, io.ErrClosedPipe
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.w.Write(p)
	c.left -= int64(n)
	return n, err
}

// cutAgent is pipeAgent whose sender side breaks after cut bytes.
func cutAgent(t *testing.T, ctx context.Context, name, root string, src source.Source, cut int64) *send.Client {
	t.Helper()
	return pipeAgentVia(t, ctx, name, root, src, 0, func(w io.WriteCloser) io.Writer { return &cutWriter{w: w, left: cut} })
}

// TestSplitStreamKilled: streams cut in the middle of ranges give them
// back; other streams (and the reconnected ones) carry them, and the file
// lands identical.
func TestSplitStreamKilled(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	src, dst, _ := splitTree(t, 2)
	s := source.Source{Root: src}
	conns := []send.Conn{
		cutAgent(t, ctx, "stream 0", dst, s, 40<<20), // in its third range
		cutAgent(t, ctx, "stream 1", dst, s, 5<<20),  // in its first
		pipeAgent(t, ctx, "stream 2", dst, s),
	}
	var redials atomic.Int32
	_, col := moveWith(t, ctx, src, conns, sharder.Options{SplitSize: splitSize}, nil, func(p *send.Pool) {
		p.Redial = func(ctx context.Context, i int) (send.Conn, error) {
			redials.Add(1)
			return pipeAgent(t, ctx, fmt.Sprintf("stream %d again", i), dst, s), nil
		}
	})
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	if redials.Load() < 2 {
		t.Errorf("%d redials, want the two cut streams back", redials.Load())
	}
	sameFile(t, filepath.Join(src, "big"), filepath.Join(dst, "big"))
	noTemps(t, dst)
}

// TestSplitResume: a run stopped after a few ranges leaves them in the
// partial; the next run (new receivers) does not send them again and
// completes the file.
func TestSplitResume(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tr := range transports[:2] {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			src, dst, _ := splitTree(t, 3)
			drain := make(chan struct{})
			var once sync.Once
			var acked atomic.Int64
			_, col := moveWith(t, ctx, src, tr.open(t, ctx, 2, dst, source.Source{Root: src}), sharder.Options{SplitSize: splitSize}, nil, func(p *send.Pool) {
				p.Drain = drain
				collect := p.OnResult
				p.OnResult = func(r send.Result) {
					collect(r)
					if !r.Final && len(r.Ack.Errors) == 0 && len(r.SrcErrors) == 0 {
						acked.Add(r.Ack.Bytes)
					}
					if acked.Load() >= 3*splitSize {
						once.Do(func() { close(drain) })
					}
				}
			})
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			first := acked.Load()
			if first >= splitFileSize || first < 3*splitSize {
				t.Fatalf("the first run acknowledged %d of %d bytes", first, splitFileSize)
			}
			if _, err := os.Stat(filepath.Join(dst, "big")); err == nil {
				t.Fatal("the file landed after a partial run")
			}
			// The second run: new receivers, as after a restart.
			p, col := move(t, ctx, src, tr.open(t, ctx, 2, dst, source.Source{Root: src}), sharder.Options{SplitSize: splitSize}, nil)
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			var sent int64
			for _, c := range p.Counters {
				sent += c.BytesSent.Load()
			}
			if sent != splitFileSize-first {
				t.Errorf("the second run sent %d bytes, want %d (the %d the first acknowledged not again)", sent, splitFileSize-first, first)
			}
			sameFile(t, filepath.Join(src, "big"), filepath.Join(dst, "big"))
			noTemps(t, dst)
		})
	}
}

// TestSplitSourceChanges: a file that changes while its ranges travel is
// reported, and neither it nor a mix of its versions lands; the next run
// moves the new version.
func TestSplitSourceChanges(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tr := range transports[:2] {
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			src, dst, big := splitTree(t, 4)
			var once sync.Once
			_, col := moveWith(t, ctx, src, tr.open(t, ctx, 2, dst, source.Source{Root: src}), sharder.Options{SplitSize: splitSize}, nil, func(p *send.Pool) {
				collect := p.OnResult
				p.OnResult = func(r send.Result) {
					collect(r)
					once.Do(func() {
						// Rewritten in place after its first range landed.
						f, err := os.OpenFile(big, os.O_WRONLY, 0)
						if err != nil {
							t.Error(err)
							return
						}
						f.WriteAt([]byte("changed"), splitFileSize/2)
						f.Close()
						later := time.Now().Add(time.Second)
						os.Chtimes(big, later, later)
					})
				}
			})
			errs := col.errors()
			if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), "changed") {
				t.Fatalf("the change is not reported: %q", errs)
			}
			if _, err := os.Stat(filepath.Join(dst, "big")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the changed file landed: %v", err)
			}
			noTemps(t, dst)
			_, col = move(t, ctx, src, tr.open(t, ctx, 2, dst, source.Source{Root: src}), sharder.Options{SplitSize: splitSize}, nil)
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			sameFile(t, big, filepath.Join(dst, "big"))
		})
	}
}
