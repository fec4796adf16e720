// Package holes finds where a sparse file's data lies (lseek's SEEK_DATA
// and SEEK_HOLE), for the sender's sparse maps and for the block delta,
// which neither reads nor hashes a block that lies wholly in a hole.
//
// It imports nothing of bulkmove but the wire's Extent.
package holes

import (
	"io"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/wire"
)

// Data returns where the data of the open file fd lies between off and
// end, as extents at the file's offsets, if that span has holes; nil if
// it has none, or the filesystem cannot say (the kernel then says "all
// data"). A map of more than most extents is coarsened: the smallest holes
// are counted as data. fd's offset is kept.
func Data(fd int, off, end int64, most int) []wire.Extent {
	// A file whose blocks cover its size has no holes: fstat says so at
	// once, where SEEK_HOLE looks for the first hole past off, the file's
	// end, through every page of the rest of the file on a tmpfs, for each
	// range of a split file in turn. (A hole it would miss reads as zeros.)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Blocks*512 >= st.Size {
		return nil
	}
	if cur, err := seek(fd, 0, io.SeekCurrent); err == nil {
		defer seek(fd, cur, io.SeekStart)
	}
	hole, err := seek(fd, off, unix.SEEK_HOLE)
	if err != nil || hole >= end {
		return nil
	}
	ext := []wire.Extent{}
	minHole := int64(0) // holes smaller than this are counted as data
	for pos := off; pos < end; {
		data, err := seek(fd, pos, unix.SEEK_DATA)
		if err == unix.ENXIO || err == nil && data >= end {
			break // a hole to the end
		}
		if err != nil {
			return nil
		}
		stop, err := seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil
		}
		stop = min(stop, end)
		if n := len(ext); n > 0 && data-(ext[n-1].Off+ext[n-1].Len) < minHole {
			ext[n-1].Len = stop - ext[n-1].Off
		} else {
			ext = append(ext, wire.Extent{Off: data, Len: stop - data})
		}
		for len(ext) > most {
			minHole = max(2*minHole, 64<<10)
			ext = Merge(ext, minHole)
		}
		pos = stop
	}
	return ext
}

// seek is lseek(2) (tests count the calls).
var seek = unix.Seek

// Merge joins the extents apart by less than gap.
func Merge(ext []wire.Extent, gap int64) []wire.Extent {
	out := ext[:1]
	for _, x := range ext[1:] {
		last := &out[len(out)-1]
		if x.Off-(last.Off+last.Len) < gap {
			last.Len = x.Off + x.Len - last.Off
		} else {
			out = append(out, x)
		}
	}
	return out
}

// DataBlocks is the run of blocks from k (before end) that hold data, of
// a span of size bytes at base in the file, in blocks of bs: the first
// block past it (k, if block k lies wholly in a hole of data) and the
// run's bytes. Those are what a delta reads at once.
func DataBlocks(data []wire.Extent, base, size, bs int64, k, end int) (j int, n int64) {
	for j = k; j < end; j++ {
		l := min(bs, size-int64(j)*bs)
		if In(data, base+int64(j)*bs, l) {
			break
		}
		n += l
	}
	return j, n
}

// In says whether the n bytes at off lie wholly in a hole of the map
// data (from Data; nil: the file has none).
func In(data []wire.Extent, off, n int64) bool {
	if data == nil {
		return false
	}
	// The first extent that ends past off.
	k := sort.Search(len(data), func(i int) bool { return data[i].Off+data[i].Len > off })
	return k == len(data) || data[k].Off >= off+n
}
