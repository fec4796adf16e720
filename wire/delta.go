package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/zeebo/xxh3"
)

// The block delta (--delta-min, protocol 19). A file of at least
// ReceiveOptions.DeltaMin bytes that DEST holds as a regular file of
// another size or mtime is not sent whole: the receiver copies DEST's
// file into the new version's temporary (a reflink where it can), hashes
// that private copy in blocks of BlockSize bytes and sends the hashes in
// a Blocks frame ahead of the batch's Need; the sender hashes its blocks
// as it reads the file and sends those that differ, and every block past
// the old copy's end, as the extents of a tar entry named by PAXDelta
// (the entry's size is their bytes). The receiver writes them into the
// temporary and truncates it to the manifest's size. The end-to-end
// check is DeltaSum over the new file's block hashes, which the receiver
// makes from the blocks it wrote and those it hashed and kept.
//
// A sparse file's holes are neither read nor hashed: a block wholly in a
// hole hashes as ZeroHash, on either side, and the blocks of SRC's holes
// (and its blocks of zeros) travel as no bytes, named by PAXDeltaZero
// (protocol 20), which the receiver makes holes, and hashes as zeros.
//
// The sender may still send such a file whole (without PAXDelta): one
// that changed too much. The receiver then drops
// the temporary and writes the file as any other.

// PAXDelta is the tar record that names a delta entry's extents
// (FormatExtents; each starts at a block boundary and ends at one or at
// the file's end). Only an entry the receiver sent Blocks for may carry
// it.
const PAXDelta = "BULKMOVE.delta"

// PAXDeltaZero, beside PAXDelta, names the blocks of a delta entry that
// are zeros (FormatExtents, the same rules, apart from PAXDelta's
// extents): they carry no bytes, and the receiver makes them holes.
const PAXDeltaZero = "BULKMOVE.deltazero"

// Block sizes and counts.
const (
	MinBlock = 32 << 10
	MaxBlock = 4 << 20
	// targetBlocks is how many blocks a file is cut into until its
	// blocks reach MaxBlock: 1 GiB in 32 KiB blocks, so that 16 runs of
	// changes at unaligned offsets cost at most 32 blocks, 1 MiB of it,
	// for a block list of 512 KiB. Every byte sent passes through sshd,
	// which costs more per byte than hashing: small blocks pay.
	targetBlocks = 32768
	// ReadChunk is how much of a file either end reads at once to hash
	// its blocks (whole blocks, at least one): a read per small block
	// would cost more in system calls than the hashing.
	ReadChunk = 1 << 20
	// MaxBlocks bounds the hashes of one file (16 MiB of them); a larger
	// file gets larger blocks.
	MaxBlocks = 1 << 20
	// maxBlockSize is the largest block a peer may name.
	maxBlockSize = 1 << 30
	// MaxDeltaExtents bounds a delta entry's map: a sender with more
	// runs of changed blocks merges the closest.
	MaxDeltaExtents = 16384
	maxBlocksFrame  = 64 + MaxBlocks*16
)

// BlockSize is the block of the delta of a file of size bytes.
func BlockSize(size int64) int64 {
	b := int64(MinBlock)
	for b < MaxBlock && size > b*targetBlocks {
		b <<= 1
	}
	for size > b*MaxBlocks {
		b <<= 1
	}
	return b
}

// ChunkBlocks is how many blocks of bs bytes one read of ReadChunk takes.
func ChunkBlocks(bs int64) int { return int(max(1, ReadChunk/bs)) }

// BlockCount is how many blocks of bs bytes a file of size bytes has.
func BlockCount(size, bs int64) int64 { return (size + bs - 1) / bs }

// BlockList is what a Blocks frame carries: the first Len bytes of DEST's
// copy of entry Index of batch ID (its size, or the new size if that is
// less: a file cut short then matches in its last block; for a range of a
// split file, its bytes from the range's offset, up to the range's end or
// the old file's), in blocks of
// BlockSize, and each block's XXH3-128 (the last block's over its bytes
// alone).
type BlockList struct {
	ID        uint64
	Index     int
	BlockSize int64
	Len       int64
	Hashes    []Sum
}

// Differs says whether block k of a file of size bytes, whose hash is h,
// differs from the block list's (its length too): then it is sent.
func (b *BlockList) Differs(k int, size int64, h Sum) bool {
	off := int64(k) * b.BlockSize
	return k >= len(b.Hashes) || min(b.BlockSize, b.Len-off) != min(b.BlockSize, size-off) || b.Hashes[k] != h
}

// EncodeBlocks encodes a Blocks payload.
func EncodeBlocks(b *BlockList) []byte {
	e := enc{b: make([]byte, 0, 40+16*len(b.Hashes))}
	e.uvarint(b.ID)
	e.uvarint(uint64(b.Index))
	e.uvarint(uint64(b.BlockSize))
	e.uvarint(uint64(b.Len))
	for _, h := range b.Hashes {
		e.b = append(e.b, h[:]...)
	}
	return e.b
}

// DecodeBlocks decodes a Blocks payload: a block size that is a power of
// two from MinBlock up, and exactly the hashes of Len bytes' blocks,
// at most MaxBlocks.
func DecodeBlocks(p []byte) (*BlockList, error) {
	d := dec{b: p}
	b := &BlockList{ID: d.uvarint("blocks batch id")}
	idx := d.uvarint("blocks entry")
	bs := d.uvarint("block size")
	old := d.uvarint("blocks length")
	if d.err != nil {
		return nil, d.err
	}
	if idx >= MaxEntries || bs < MinBlock || bs > maxBlockSize || bits.OnesCount64(bs) != 1 || old > 1<<62 {
		return nil, protoErr("block list of entry %d: block size %d, length %d", idx, bs, old)
	}
	n := BlockCount(int64(old), int64(bs))
	if n > MaxBlocks || int64(len(d.b)) != n*16 {
		return nil, protoErr("block list of entry %d: %d bytes of hashes for %d blocks", idx, len(d.b), n)
	}
	b.Index, b.BlockSize, b.Len = int(idx), int64(bs), int64(old)
	b.Hashes = make([]Sum, n)
	for i := range b.Hashes {
		copy(b.Hashes[i][:], d.b[16*i:])
	}
	return b, nil
}

// BlockHash is the hash of one block.
func BlockHash(p []byte) Sum { return xxh3.Hash128(p).Bytes() }

// HashBlocks puts the hashes of p's blocks of bs bytes (the last may be
// short) in dst, one each: a chunk read at once (ReadChunk).
func HashBlocks(dst []Sum, p []byte, bs int64) {
	for i := range dst {
		o := int64(i) * bs
		dst[i] = BlockHash(p[o:min(o+bs, int64(len(p)))])
	}
}

// DeltaSum is the end-to-end sum of a file sent as a delta: the XXH3-128
// of its size, its block size and its blocks' hashes in order.
func DeltaSum(size, bs int64, hashes []Sum) Sum {
	h := xxh3.New128()
	var hd [16]byte
	binary.BigEndian.PutUint64(hd[:8], uint64(size))
	binary.BigEndian.PutUint64(hd[8:], uint64(bs))
	h.Write(hd[:])
	for i := range hashes {
		h.Write(hashes[i][:])
	}
	return h.Sum128().Bytes()
}

// ZeroHash is BlockHash of n zero bytes: made once for each block size,
// each time for a file's last block.
func ZeroHash(n int64) Sum {
	whole := n&(n-1) == 0
	if h, ok := zeroHashes.Load(n); ok && whole {
		return h.(Sum)
	}
	h := xxh3.New128()
	var z [64 << 10]byte
	for left := n; left > 0; left -= int64(len(z)) {
		h.Write(z[:min(left, int64(len(z)))])
	}
	s := Sum(h.Sum128().Bytes())
	if whole {
		zeroHashes.Store(n, s)
	}
	return s
}

var zeroHashes sync.Map // int64 -> Sum

// ParseDeltaZero reads a PAXDeltaZero map for a file of size bytes in
// blocks of bs, whose PAXDelta extents are data (ParseDelta's): the same
// rules, and apart from data's extents.
func ParseDeltaZero(s string, size, bs int64, data []Extent) ([]Extent, error) {
	ext, _, err := ParseDelta(s, size, bs)
	if err != nil {
		return nil, err
	}
	k := 0
	for _, z := range ext {
		for k < len(data) && data[k].Off+data[k].Len <= z.Off {
			k++
		}
		if k < len(data) && data[k].Off < z.Off+z.Len {
			return nil, fmt.Errorf("delta zero extent %d+%d overlaps the data extent %d+%d", z.Off, z.Len, data[k].Off, data[k].Len)
		}
	}
	return ext, nil
}

// ParseDelta reads a PAXDelta map for a file of size bytes in blocks of
// bs: extents in order, apart, inside the file, each from a block
// boundary to one or to the file's end; at most MaxDeltaExtents. It
// returns them with the bytes they carry.
func ParseDelta(s string, size, bs int64) ([]Extent, int64, error) {
	ext, data, err := parseExtents(s, size, MaxDeltaExtents, "delta")
	if err != nil {
		return nil, 0, err
	}
	for _, x := range ext {
		if x.Off%bs != 0 || (x.Off+x.Len)%bs != 0 && x.Off+x.Len != size {
			return nil, 0, fmt.Errorf("delta map extent %d+%d is not whole blocks of %d bytes", x.Off, x.Len, bs)
		}
	}
	return ext, data, nil
}
