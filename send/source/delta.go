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

// deltaPlan is the first pass over f (entry e: the whole file, or one
// range of it) against the receiver's block list bl: the hash of each of
// its blocks and the extents of those to send, both counted from e's
// first byte. A read error or a file shorter than e's end is returned.
func (s Source) deltaPlan(f *File, e *model.Entry, bl *wire.BlockList, buf []byte, ctr *metrics.Stream) (ext []wire.Extent, hashes []wire.Sum, err error) {
	bs := bl.BlockSize
	base, size := e.DataOff(), e.DataLen() // a range's blocks start at its offset
	hashes = make([]wire.Sum, wire.BlockCount(size, bs))
	start := time.Now()
	for k := range hashes {
		off := int64(k) * bs
		p := buf[:min(bs, size-off)]
		s.Limit.Wait(len(p))
		if err := readAt(f, p, base+off); err != nil {
			return nil, nil, err
		}
		hashes[k] = wire.BlockHash(p)
		if !bl.Differs(k, size, hashes[k]) {
			continue
		}
		if n := len(ext); n > 0 && ext[n-1].Off+ext[n-1].Len == off {
			ext[n-1].Len += int64(len(p))
		} else {
			ext = append(ext, wire.Extent{Off: off, Len: int64(len(p))})
		}
	}
	if ctr != nil {
		ctr.ReadNanos.Add(int64(time.Since(start)))
	}
	if ext == nil {
		ext = []wire.Extent{} // nothing but the size
	}
	for minGap := int64(2 * bs); len(ext) > wire.MaxDeltaExtents; minGap *= 2 {
		ext = mergeExtents(ext, minGap) // (whole blocks: the gaps are)
	}
	return ext, hashes, nil
}

// sendDelta is the second pass: the extents' blocks (counted from base,
// the first byte of the entry's range), read again into w,
// each checked against its first hash. changed says one was not the
// same (or the file ended early: then zeros keep the stream in step).
func (s Source) sendDelta(w io.Writer, f *File, base int64, ext []wire.Extent, bs int64, hashes []wire.Sum, buf []byte) (changed error, werr error) {
	for _, x := range ext {
		for off := x.Off; off < x.Off+x.Len; off += bs {
			p := buf[:min(bs, x.Off+x.Len-off)]
			s.Limit.Wait(len(p))
			if err := readAt(f, p, base+off); err != nil {
				clear(p)
				if changed == nil {
					changed = fmt.Errorf("read %s: %w while being read (%v)", f.Name(), ErrChanged, err)
				}
			} else if changed == nil && wire.BlockHash(p) != hashes[off/bs] {
				changed = fmt.Errorf("read %s: %w while being read (the block at %d)", f.Name(), ErrChanged, base+off)
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
