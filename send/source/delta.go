package source

// The block delta's sending side (see wire/delta.go): a file the receiver
// sent a block list for is read twice. The first pass hashes every block
// and picks those that differ from DEST's (and all past its end); the
// tar entry then names them (wire.PAXDelta) and carries their bytes, read
// again and hashed again in the second pass: a block that no longer
// hashes as in the first changed while being read, and the file is
// discarded as any file that changed (it goes again). The end-to-end sum
// is wire.DeltaSum over the first pass's hashes, which the receiver
// remakes from the blocks it wrote and those of its copy it kept.

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/holes"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Delta is a file sent as a block delta: Size bytes, of which Sent went.
type Delta struct {
	Index      int
	Size, Sent int64
}

// deltaHook, if set, is called between a delta's two passes (tests).
var deltaHook func(path string)

// What the first pass makes of each block.
const (
	blockKeep byte = iota // the receiver's is the same
	blockSend             // its bytes go
	blockZero             // zeros: a hole of f's, or zeros that differ (--sparse)
)

// deltaPlan is the first pass over f (entry e: the whole file, or one
// range of it) against the receiver's block list bl: the hash of each of
// its blocks, the extents of those to send and, with --sparse, of those
// that are zeros, all counted from e's first byte. A block that lies
// wholly in one of f's holes is not read: it hashes as zeros, and goes as
// one (the receiver makes it a hole, where its own may hold data). A read
// error or a file shorter than e's end is returned.
func (s Source) deltaPlan(f *File, e *model.Entry, bl *wire.BlockList, buf []byte, ctr *metrics.Stream) (ext, zero []wire.Extent, hashes []wire.Sum, err error) {
	bs := bl.BlockSize
	base, size := e.DataOff(), e.DataLen() // a range's blocks start at its offset
	hashes = make([]wire.Sum, wire.BlockCount(size, bs))
	kind := make([]byte, len(hashes))
	var data []wire.Extent // where f's data lies (nil: everywhere)
	if s.Sparse {
		data = holes.Data(f.fd, base, base+size, wire.MaxDeltaExtents)
	}
	start := time.Now()
	per := wire.ChunkBlocks(bs)
	for k := 0; k < len(hashes); {
		off := int64(k) * bs
		// The blocks from k that hold data, read at once.
		j, n := holes.DataBlocks(data, base, size, bs, k, min(k+per, len(hashes)))
		if j == k { // in a hole
			hashes[k], kind[k] = wire.ZeroHash(min(bs, size-off)), blockZero
			k++
			continue
		}
		p := buf[:n]
		s.Limit.Wait(len(p))
		if err := readAt(f, p, base+off); err != nil {
			return nil, nil, nil, err
		}
		wire.HashBlocks(hashes[k:j], p, bs)
		for ; k < j; k++ {
			l := min(bs, size-int64(k)*bs)
			switch {
			case !bl.Differs(k, size, hashes[k]):
			case s.Sparse && hashes[k] == wire.ZeroHash(l):
				kind[k] = blockZero
			default:
				kind[k] = blockSend
			}
		}
	}
	if ctr != nil {
		ctr.ReadNanos.Add(int64(time.Since(start)))
	}
	ext, zero = planZeros(kind, bs, size, func(k int) bool { return bl.Differs(k, size, hashes[k]) })
	return ext, zero, hashes, nil
}

// planZeros is planRuns, with at most wire.MaxDeltaExtents runs of zeros:
// past that, the blocks of zeros that do not differ (differs) stay as the
// receiver holds them, and if that is not enough, the rest go as bytes.
func planZeros(kind []byte, bs, size int64, differs func(k int) bool) (ext, zero []wire.Extent) {
	ext, zero = planRuns(kind, bs, size)
	if len(zero) <= wire.MaxDeltaExtents {
		return ext, zero
	}
	for k := range kind {
		if kind[k] == blockZero && !differs(k) {
			kind[k] = blockKeep
		}
	}
	if ext, zero = planRuns(kind, bs, size); len(zero) <= wire.MaxDeltaExtents {
		return ext, zero
	}
	for k := range kind {
		if kind[k] == blockZero {
			kind[k] = blockSend
		}
	}
	return planRuns(kind, bs, size)
}

// planRuns makes the blocks' kinds into the extents to send (at most
// wire.MaxDeltaExtents: the closest are merged, and the blocks between
// them sent too) and those of zeros, in a file of size bytes.
func planRuns(kind []byte, bs, size int64) (ext, zero []wire.Extent) {
	ext = runs(kind, blockSend, bs, size)
	if len(ext) > wire.MaxDeltaExtents {
		for minGap := int64(2 * bs); len(ext) > wire.MaxDeltaExtents; minGap *= 2 {
			ext = holes.Merge(ext, minGap) // (whole blocks: the gaps are)
		}
		for _, x := range ext {
			for off := x.Off; off < x.Off+x.Len; off += bs {
				kind[off/bs] = blockSend
			}
		}
	}
	if ext == nil {
		ext = []wire.Extent{} // nothing but the size
	}
	return ext, runs(kind, blockZero, bs, size)
}

// runs is the extents of the blocks of kind k.
func runs(kind []byte, k byte, bs, size int64) []wire.Extent {
	var ext []wire.Extent
	for i, c := range kind {
		if c != k {
			continue
		}
		off := int64(i) * bs
		l := min(bs, size-off)
		if n := len(ext); n > 0 && ext[n-1].Off+ext[n-1].Len == off {
			ext[n-1].Len += l
		} else {
			ext = append(ext, wire.Extent{Off: off, Len: l})
		}
	}
	return ext
}

// sendDelta is the second pass: the extents' blocks (counted from base,
// the first byte of the entry's range), read again into w,
// each checked against its first hash. changed says one was not the
// same (or the file ended early: then zeros keep the stream in step).
func (s Source) sendDelta(w io.Writer, f *File, base int64, ext []wire.Extent, bs int64, hashes []wire.Sum, buf []byte) (changed error, werr error) {
	chunk := int64(wire.ChunkBlocks(bs)) * bs
	for _, x := range ext {
		for off := x.Off; off < x.Off+x.Len; off += chunk {
			p := buf[:min(chunk, x.Off+x.Len-off)]
			s.Limit.Wait(len(p))
			if err := readAt(f, p, base+off); err != nil {
				clear(p)
				if changed == nil {
					changed = fmt.Errorf("read %s: %w while being read (%v)", f.Name(), ErrChanged, err)
				}
			}
			for o := int64(0); changed == nil && o < int64(len(p)); o += bs {
				if wire.BlockHash(p[o:min(o+bs, int64(len(p)))]) != hashes[(off+o)/bs] {
					changed = fmt.Errorf("read %s: %w while being read (the block at %d)", f.Name(), ErrChanged, base+off+o)
				}
			}
			if _, err := w.Write(p); err != nil {
				return changed, err
			}
		}
	}
	return changed, nil
}

// readAt reads p from f at off: a read error, or ErrChanged if f ends
// before p is full.
func readAt(f *File, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(f.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name(), err)
		}
		if n == 0 {
			return fmt.Errorf("read %s: %w while being read (shrank)", f.Name(), ErrChanged)
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}
