package wire_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

func header(typ byte, n uint32) []byte {
	h := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[1:], n)
	return h
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// A peer declares a frame of MaxFrame bytes, sends ten and stalls: the
// reader has allocated for what arrived, not for what was declared.
func TestReadFrameDeclaredNotSent(t *testing.T) {
	for _, typ := range []byte{wire.Manifest, wire.Ack, wire.Commit, wire.Pruned} {
		t.Run(string(typ), func(t *testing.T) {
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				_, _, err := wire.ReadFrame(bufio.NewReader(pr))
				done <- err
			}()
			before := totalAlloc()
			pw.Write(append(header(typ, wire.MaxFrame), "0123456789"...)) // returns once read
			var grown uint64
			for range 10 {
				time.Sleep(20 * time.Millisecond)
				if grown = totalAlloc() - before; grown > 4<<20 {
					break
				}
			}
			pw.Close()
			if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("ReadFrame of a frame cut short: %v, want io.ErrUnexpectedEOF", err)
			}
			if grown > 4<<20 {
				t.Fatalf("ReadFrame allocated %d MiB for a frame that declared %d MiB and sent 10 bytes", grown>>20, wire.MaxFrame>>20)
			}
		})
	}
}

// A frame that carries no list is refused at its header when it declares
// more than its type holds, before its payload is read.
func TestFrameLimitByType(t *testing.T) {
	for _, c := range []struct {
		typ byte
		max int
	}{
		{wire.Hello, 64 << 10}, {wire.Summary, 64 << 10}, {wire.Data, 1 << 10}, {wire.Skipped, 1 << 10},
		{wire.End, 1 << 10}, {wire.Need, 32 + wire.MaxEntries/8}, {wire.Fail, wire.MaxMessage},
		{wire.Manifest, wire.MaxFrame}, {wire.Ack, wire.MaxFrame}, {wire.Commit, wire.MaxFrame},
		{wire.Prune, wire.MaxFrame}, {wire.Pruned, wire.MaxFrame},
	} {
		if got := wire.FrameLimit(c.typ); got != c.max {
			t.Errorf("FrameLimit(%q) = %d, want %d", c.typ, got, c.max)
		}
		// The header alone: a frame within the limit wants its payload
		// (io.ErrUnexpectedEOF), one over it is refused.
		_, _, err := wire.ReadFrame(bufio.NewReader(bytes.NewReader(header(c.typ, uint32(c.max)))))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("frame %q of %d bytes: %v, want it read", c.typ, c.max, err)
		}
		_, _, err = wire.ReadFrame(bufio.NewReader(bytes.NewReader(header(c.typ, uint32(c.max+1)))))
		if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), fmt.Sprintf("over the %d-byte limit", c.max)) {
			t.Errorf("frame %q of %d bytes: %v, want a protocol error naming the limit", c.typ, c.max+1, err)
		}
	}
	// The largest need list, hello and summary a peer sends fit.
	need := wire.EncodeNeed(math.MaxUint64, make([]bool, wire.MaxEntries))
	if err := wire.WriteFrame(io.Discard, wire.Need, need); err != nil {
		t.Error(err)
	}
	// A Fail frame's text is cut to its limit, not refused.
	var b bytes.Buffer
	if err := wire.WriteFrame(&b, wire.Fail, bytes.Repeat([]byte("x"), 2*wire.MaxMessage)); err != nil {
		t.Fatal(err)
	}
	typ, p, err := wire.ReadFrame(bufio.NewReader(&b))
	if err != nil || typ != wire.Fail || len(p) != wire.MaxMessage {
		t.Errorf("long Fail: %q, %d bytes, %v; want its first %d bytes", typ, len(p), err, wire.MaxMessage)
	}
	if err := wire.WriteFrame(io.Discard, wire.Hello, make([]byte, 64<<10+1)); err == nil {
		t.Error("WriteFrame sent a hello over its limit")
	}
}

// Frames of every size arrive whole, however the bytes come in, through
// ReadFrame and through a FrameReader that reuses its buffer.
func TestReadFrameSizes(t *testing.T) {
	sizes := []int{0, 1, 100, 64<<10 - 1, 64 << 10, 64<<10 + 1, 256 << 10, 1<<20 + 7}
	var stream bytes.Buffer
	var payloads [][]byte
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i*7 + j*13)
		}
		payloads = append(payloads, p)
		if err := wire.WriteFrame(&stream, wire.Manifest, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"whole", "half", "one byte"} {
		for _, reuse := range []bool{false, true} {
			var r io.Reader = bytes.NewReader(stream.Bytes())
			switch mode {
			case "half":
				r = iotest.HalfReader(r)
			case "one byte":
				r = iotest.OneByteReader(r)
			}
			br := bufio.NewReaderSize(r, 4096)
			fr := &wire.FrameReader{R: br}
			for i, want := range payloads {
				var typ byte
				var p []byte
				var err error
				if reuse {
					typ, p, err = fr.Next()
				} else {
					typ, p, err = wire.ReadFrame(br)
				}
				if err != nil || typ != wire.Manifest || !bytes.Equal(p, want) {
					t.Fatalf("%s, reuse %v: frame %d of %d bytes: %q, %d bytes, %v", mode, reuse, i, len(want), typ, len(p), err)
				}
				if cap(p) > max(2*len(p), 64<<10) {
					t.Errorf("%s: a payload of %d bytes holds %d", mode, len(p), cap(p))
				}
			}
			if _, _, err := wire.ReadFrame(br); err != io.EOF {
				t.Errorf("%s: after the last frame: %v, want io.EOF", mode, err)
			}
		}
	}
}

// Admit refuses a frame at its header: its payload is never read.
func TestFrameReaderAdmit(t *testing.T) {
	var b bytes.Buffer
	wire.WriteFrame(&b, wire.Ack, []byte("ok"))
	wire.WriteFrame(&b, wire.Manifest, make([]byte, 1000))
	refused := errors.New("over the budget")
	fr := &wire.FrameReader{R: bufio.NewReader(&b), Admit: func(typ byte, n int) error {
		if typ == wire.Manifest && n > 100 {
			return refused
		}
		return nil
	}}
	if typ, p, err := fr.Next(); err != nil || typ != wire.Ack || string(p) != "ok" {
		t.Fatalf("first frame: %q %q %v", typ, p, err)
	}
	if _, _, err := fr.Next(); !errors.Is(err, refused) {
		t.Fatalf("manifest over Admit's bound: %v, want its error", err)
	}
}

// A manifest whose decoded form would pass what the receiver may still
// hold is refused before its entries are allocated, or once its strings
// pass the bound; within the bound it decodes as ever, and its cost is
// what DecodeManifestMax counted.
func TestDecodeManifestMax(t *testing.T) {
	var entries []model.Entry
	for i := range 1000 {
		entries = append(entries, model.Entry{Path: fmt.Sprintf("dir/file%04d", i), Kind: model.KindFile, Mode: 0o644, Size: 1})
	}
	m := &wire.BatchManifest{ID: 7, Entries: entries}
	m.Sums = make([]wire.Sum, len(entries))
	for i := range m.Sums {
		m.Sums[i] = wire.HashBytes([]byte{byte(i), byte(i >> 8)})
	}
	p := wire.EncodeManifest(m)
	got, err := wire.DecodeManifestMax(p, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	cost := wire.ManifestCost(got)
	if cost < int64(len(p)) {
		t.Errorf("a decoded manifest of %d bytes on the wire costs %d", len(p), cost)
	}
	if _, err := wire.DecodeManifestMax(p, cost); err != nil {
		t.Errorf("within its cost: %v", err)
	}
	for _, max := range []int64{0, 1000, cost / 2, cost - 1} {
		m, err := wire.DecodeManifestMax(p, max)
		if m != nil || !errors.Is(err, wire.ErrLimit) || !strings.Contains(err.Error(), fmt.Sprint(max)) {
			t.Errorf("DecodeManifestMax(%d of %d): %v, want an error naming the bound", max, cost, err)
		}
	}
	// A million entries of nine bytes each: refused on their count alone,
	// before a hundred MiB of entries is allocated.
	big := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: make([]model.Entry, wire.MaxEntries)})
	before := totalAlloc()
	if _, err := wire.DecodeManifestMax(big, 16<<20); !errors.Is(err, wire.ErrLimit) {
		t.Fatalf("a million entries within 16 MiB: %v", err)
	}
	if grown := totalAlloc() - before; grown > 1<<20 {
		t.Errorf("refusing a manifest on its count allocated %d bytes", grown)
	}
}

// The frame reader never panics, allocates at most what arrived (twice
// over, as its buffer doubles) and returns what was written.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{wire.Hello, 0, 0, 0, 2, '{', '}'})
	f.Add(append(header(wire.Manifest, wire.MaxFrame), 1, 2, 3))
	f.Add(append(header(wire.Hello, 1<<20), 1, 2, 3))
	f.Add([]byte{'Z', 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReaderSize(iotest.HalfReader(bytes.NewReader(b)), 16)
		for {
			typ, p, err := wire.ReadFrame(br)
			if err != nil {
				return
			}
			if len(p) > wire.FrameLimit(typ) || cap(p) > max(2*len(p), 64<<10) {
				t.Fatalf("frame %q: %d bytes in %d, over its limit %d", typ, len(p), cap(p), wire.FrameLimit(typ))
			}
		}
	})
}

func BenchmarkReadFrameSmall(b *testing.B) {
	benchFrames(b, 200, false)
}

func BenchmarkFrameReaderSmall(b *testing.B) {
	benchFrames(b, 200, true)
}

func BenchmarkReadFrameManifest(b *testing.B) {
	benchFrames(b, 40<<10, false)
}

func BenchmarkReadFrameLarge(b *testing.B) {
	benchFrames(b, 4<<20, false)
}

func benchFrames(b *testing.B, size int, reuse bool) {
	var one bytes.Buffer
	wire.WriteFrame(&one, wire.Manifest, make([]byte, size))
	frames := bytes.Repeat(one.Bytes(), max(1, (1<<20)/one.Len()))
	r := bytes.NewReader(frames)
	br := bufio.NewReaderSize(r, 256<<10)
	fr := &wire.FrameReader{R: br}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if reuse {
			_, _, err = fr.Next()
		} else {
			_, _, err = wire.ReadFrame(br)
		}
		if err == io.EOF {
			r.Reset(frames)
			br.Reset(r)
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
