package wire_test

import (
	"errors"
	"testing"

	"github.com/bulkmove/bulkmove/wire"
)

// TestBlockSize: 32 KiB blocks up to 1 GiB (16 runs of changes cost at
// most 32 blocks, 1 MiB: under 3% of it), 4 MiB at most until a file
// would have more than MaxBlocks.
func TestBlockSize(t *testing.T) {
	for _, c := range []struct{ size, bs int64 }{
		{1, 32 << 10}, {1 << 30, 32 << 10}, {1<<30 + 1, 64 << 10}, {32 << 30, 1 << 20}, {128 << 30, 4 << 20}, {1 << 40, 4 << 20}, {8 << 40, 8 << 20},
	} {
		if got := wire.BlockSize(c.size); got != c.bs {
			t.Errorf("BlockSize(%d) = %d, want %d", c.size, got, c.bs)
		}
	}
}

// TestDecodeBlocksBounds: a receiver's block list round-trips, and one
// with a block size out of bounds or not a power of two, or with other
// than its length's count of hashes, is a protocol error.
func TestDecodeBlocksBounds(t *testing.T) {
	good := &wire.BlockList{ID: 3, Index: 2, BlockSize: wire.MinBlock, Len: 3*wire.MinBlock + 1, Hashes: make([]wire.Sum, 4)}
	good.Hashes[3][0] = 9
	b, err := wire.DecodeBlocks(wire.EncodeBlocks(good))
	if err != nil || b.ID != 3 || b.Index != 2 || b.Len != good.Len || len(b.Hashes) != 4 || b.Hashes[3][0] != 9 {
		t.Fatalf("round trip: %+v, %v", b, err)
	}
	for _, bad := range []*wire.BlockList{
		{BlockSize: wire.MinBlock / 2, Len: 1, Hashes: make([]wire.Sum, 1)},
		{BlockSize: wire.MinBlock + 1, Len: 1, Hashes: make([]wire.Sum, 1)},
		{BlockSize: 1 << 31, Len: 1, Hashes: make([]wire.Sum, 1)},
		{BlockSize: wire.MinBlock, Len: wire.MinBlock + 1, Hashes: make([]wire.Sum, 1)},
		{BlockSize: wire.MinBlock, Len: 1, Hashes: make([]wire.Sum, 2)},
		{BlockSize: wire.MinBlock, Len: (wire.MaxBlocks + 1) * wire.MinBlock},
	} {
		if _, err := wire.DecodeBlocks(wire.EncodeBlocks(bad)); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("block size %d, length %d, %d hashes: %v, want a protocol error", bad.BlockSize, bad.Len, len(bad.Hashes), err)
		}
	}
}

// TestParseDeltaBounds: a delta map is whole blocks in order inside the
// file, at most MaxDeltaExtents of them.
func TestParseDeltaBounds(t *testing.T) {
	const bs, size = 1 << 17, 10<<17 + 5
	if ext, n, err := wire.ParseDelta("2,0,131072,1310720,5", size, bs); err != nil || len(ext) != 2 || n != 131077 {
		t.Fatalf("good map: %v %d %v", ext, n, err)
	}
	for _, bad := range []string{
		"1,0,131071",               // cuts a block
		"1,1,131072",               // unaligned
		"1,1310720,131072",         // past the end
		"2,0,262144,131072,131072", // overlaps
		"1,0,0",                    // empty
		"2,0,131072",               // short
		"99999,0,131072",           // too many
	} {
		if _, _, err := wire.ParseDelta(bad, size, bs); err == nil {
			t.Errorf("ParseDelta(%q) accepted", bad)
		}
	}
}

// TestParseDeltaZero: a map of blocks of zeros follows a delta map's
// rules and may not touch a block of the data map.
func TestParseDeltaZero(t *testing.T) {
	const bs, size = 1 << 17, 10<<17 + 5
	data := []wire.Extent{{Off: 2 * bs, Len: bs}, {Off: 5 * bs, Len: 2 * bs}}
	if z, err := wire.ParseDeltaZero("3,0,262144,393216,262144,1179648,131077", size, bs, data); err != nil || len(z) != 3 {
		t.Fatalf("good map: %v %v", z, err)
	}
	for _, bad := range []string{
		"1,262144,131072",  // a data block
		"1,131072,262144",  // runs into one
		"1,786432,262144",  // starts in one
		"1,0,1441797",      // covers all
		"1,1,131072",       // unaligned
		"1,1310720,131072", // past the end
	} {
		if _, err := wire.ParseDeltaZero(bad, size, bs, data); err == nil {
			t.Errorf("ParseDeltaZero(%q) accepted", bad)
		}
	}
}

// TestZeroHash: the hash of zeros is BlockHash's of as many zero bytes,
// asked once or again, for a whole block or a last one.
func TestZeroHash(t *testing.T) {
	for _, n := range []int64{1, 5, 1 << 17, 1<<17 + 3, 4 << 20, 1 << 17} {
		if got, want := wire.ZeroHash(n), wire.BlockHash(make([]byte, n)); got != want {
			t.Errorf("ZeroHash(%d) = %x, want %x", n, got, want)
		}
	}
}
