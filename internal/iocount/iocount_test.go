package iocount

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
)

// TestCount: what passes is counted, short reads and writes and errors
// included, and the data passes unchanged.
func TestCount(t *testing.T) {
	r := &Reader{R: iotest.OneByteReader(strings.NewReader("hello, world"))}
	var buf bytes.Buffer
	w := &Writer{W: &buf}
	if n, err := io.Copy(w, r); err != nil || n != 12 || r.N != 12 || w.N != 12 || buf.String() != "hello, world" {
		t.Fatalf("copied %d, %v: read %d, wrote %d, %q", n, err, r.N, w.N, buf.String())
	}
	boom := errors.New("boom")
	r = &Reader{R: iotest.DataErrReader(iotest.ErrReader(boom))}
	if _, err := r.Read(make([]byte, 4)); !errors.Is(err, boom) || r.N != 0 {
		t.Errorf("read error: %v, counted %d", err, r.N)
	}
	w = &Writer{W: shortWriter{3}}
	if n, err := w.Write([]byte("abcdef")); n != 3 || !errors.Is(err, io.ErrShortWrite) || w.N != 3 {
		t.Errorf("short write: %d, %v, counted %d", n, err, w.N)
	}
}

type shortWriter struct{ n int }

func (s shortWriter) Write(p []byte) (int, error) { return min(s.n, len(p)), io.ErrShortWrite }

// TestShared: several SharedReaders add to one counter at once (run with
// -race).
func TestShared(t *testing.T) {
	var total atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := &SharedReader{R: strings.NewReader(strings.Repeat("x", 1000)), N: &total}
			if _, err := io.Copy(io.Discard, r); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if total.Load() != 4000 {
		t.Errorf("counted %d, want 4000", total.Load())
	}
}

// BenchmarkWriter: counting adds no allocation to a write.
func BenchmarkWriter(b *testing.B) {
	w := &Writer{W: io.Discard}
	p := make([]byte, 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		_, _ = w.Write(p)
	}
}

func TestNoAllocs(t *testing.T) {
	w := &Writer{W: io.Discard}
	r := &Reader{R: zeros{}}
	p := make([]byte, 512)
	if a := testing.AllocsPerRun(100, func() { _, _ = w.Write(p); _, _ = r.Read(p) }); a != 0 {
		t.Errorf("%v allocations a write and a read, want 0", a)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
