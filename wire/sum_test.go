package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"github.com/zeebo/xxh3"
)

func sumEntries() []model.Entry {
	return []model.Entry{
		{Path: "a", Kind: model.KindFile, Mode: 0o644, Size: 3, MTime: 1_600_000_000_123456789, Nlink: 1},
		{Path: "d", Kind: model.KindDir, Mode: 0o755},
		{Path: "b", Kind: model.KindFile, Mode: 0o644, Size: 5, Nlink: 1},
		{Path: "e", Kind: model.KindFile, Mode: 0o644},
	}
}

// Manifests round-trip with and without content hashes; without, they
// are byte for byte what they were (no sums: no cost); each hash costs 16
// bytes.
func TestManifestSums(t *testing.T) {
	plain := &wire.BatchManifest{ID: 9, Entries: sumEntries()}
	p := wire.EncodeManifest(plain)
	m, err := wire.DecodeManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sums != nil || !reflect.DeepEqual(m, plain) {
		t.Fatalf("round trip without sums: %+v", m)
	}
	// Sums of all zeros, or on entries that are not files, are left out.
	zeros := &wire.BatchManifest{ID: 9, Entries: sumEntries(), Sums: make([]wire.Sum, 4)}
	zeros.Sums[1] = wire.HashBytes([]byte("a directory has no content hash"))
	if q := wire.EncodeManifest(zeros); !bytes.Equal(q, p) {
		t.Errorf("zero sums change the encoding: %d bytes, %d without", len(q), len(p))
	}

	with := &wire.BatchManifest{ID: 9, Entries: sumEntries(),
		Sums: []wire.Sum{wire.HashBytes([]byte("abc")), {}, {}, wire.EmptySum}}
	q := wire.EncodeManifest(with)
	if len(q) != len(p)+2*16 {
		t.Errorf("two sums take %d bytes more, want 32", len(q)-len(p))
	}
	m, err = wire.DecodeManifest(q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, with) {
		t.Fatalf("round trip with sums:\n%+v\n%+v", m, with)
	}

	// A short slice of sums: the rest have none.
	short := &wire.BatchManifest{ID: 9, Entries: sumEntries(), Sums: []wire.Sum{wire.HashBytes([]byte("abc"))}}
	m, err = wire.DecodeManifest(wire.EncodeManifest(short))
	if err != nil || len(m.Sums) != 4 || m.Sums[0] != short.Sums[0] || m.Sums[3] != (wire.Sum{}) {
		t.Fatalf("short sums: %+v, %v", m, err)
	}
}

// A hash field cut short, an all-zero hash or a hash on a directory are
// protocol errors, never a manifest.
func TestManifestSumRefused(t *testing.T) {
	one := &wire.BatchManifest{ID: 1, Entries: sumEntries()[:1], Sums: []wire.Sum{wire.HashBytes([]byte("abc"))}}
	p := wire.EncodeManifest(one)
	for cut := 1; cut <= 16; cut++ {
		m, err := wire.DecodeManifest(p[:len(p)-cut])
		if err == nil || !errors.Is(err, wire.ErrProtocol) || m != nil {
			t.Fatalf("hash cut by %d bytes: %v, %+v", cut, err, m)
		}
		if !strings.Contains(err.Error(), "content hash") {
			t.Errorf("hash cut by %d bytes: error %q does not name the hash", cut, err)
		}
	}
	// Trailing bytes after a hash are refused too.
	if _, err := wire.DecodeManifest(append(p, 0)); err == nil {
		t.Error("a trailing byte after the hash decoded")
	}
	zero := bytes.Clone(p)
	clear(zero[len(zero)-16:])
	if _, err := wire.DecodeManifest(zero); err == nil || !strings.Contains(err.Error(), "all-zero") {
		t.Errorf("an all-zero hash: %v", err)
	}
	// A hash on a directory: its flag set by hand.
	dir := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{{Path: "d", Kind: model.KindDir, Mode: 0o755}}})
	dir[3] |= 0x80 // id, flags, count, then the kind
	dir = append(dir, bytes.Repeat([]byte{1}, 16)...)
	if _, err := wire.DecodeManifest(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a hash on a directory: %v", err)
	}
}

// The streaming hash is XXH3-128 of the whole input, as the one-shot one.
func TestHashReader(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // over several buffers
	got, n, err := wire.HashReader(bytes.NewReader(data), make([]byte, 4096))
	if err != nil || n != int64(len(data)) {
		t.Fatal(n, err)
	}
	if want := wire.Sum(xxh3.Hash128(data).Bytes()); got != want || got != wire.HashBytes(data) {
		t.Errorf("HashReader %x, Hash128 %x", got, want)
	}
	if wire.EmptySum != wire.HashBytes(nil) || wire.EmptySum == (wire.Sum{}) {
		t.Errorf("EmptySum %x", wire.EmptySum)
	}
}

// The speed of the hash, for the README: go test -bench Hash ./wire
func BenchmarkHash(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		buf := bytes.Repeat([]byte{0x5a, 0xa5, 0x3c}, size/3+1)[:size]
		b.Run(map[int]string{1 << 10: "1KiB", 1 << 20: "1MiB"}[size], func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				wire.HashBytes(buf)
			}
		})
	}
}

// A file the sender's resume journal names round-trips as marked, in one
// bit of its kind byte; the mark on anything but a regular file is a
// protocol error.
func TestManifestResumed(t *testing.T) {
	es := sumEntries()
	es[0].Resumed, es[3].Resumed = true, true
	m := &wire.BatchManifest{ID: 3, Entries: es}
	p := wire.EncodeManifest(m)
	if plain := wire.EncodeManifest(&wire.BatchManifest{ID: 3, Entries: sumEntries()}); len(p) != len(plain) {
		t.Errorf("the mark takes %d bytes, want none", len(p)-len(plain))
	}
	got, err := wire.DecodeManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip with marks:\n%+v\n%+v", got, m)
	}
	dir := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{{Path: "d", Kind: model.KindDir, Mode: 0o755}}})
	dir[3] |= 0x10 // id, flags, count, then the kind
	if _, err := wire.DecodeManifest(dir); !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "marked as resumed but is a dir") {
		t.Errorf("a directory marked as resumed: %v", err)
	}
}
