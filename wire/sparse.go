package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Extent is a range of a sparse file that holds data; the rest of the file,
// up to its size in the manifest, is holes (zeros that take no space).
//
// A sparse regular file travels as a tar entry whose size is its data
// bytes alone (the extents' data, in order) and whose PAX record
// BULKMOVE.sparse is its map (FormatExtents). The manifest's size is the
// file's: a map can only place data inside it, and the extents' lengths
// must add up to the tar entry's size, so a few bytes on the wire never
// declare more than the manifest did. (GNU.sparse records, whose map says
// how large the file is, are still refused.)
type Extent struct{ Off, Len int64 }

// MaxExtents bounds a sparse file's map; a sender merges extents across
// the smallest holes to stay within it.
const MaxExtents = 4096

// FormatExtents writes a map: the count, then each extent's offset and
// length, in decimal, comma-separated ("2,0,4096,1048576,8192"; "0": all
// hole).
func FormatExtents(ext []Extent) string {
	b := strconv.AppendInt(nil, int64(len(ext)), 10)
	for _, x := range ext {
		b = append(b, ',')
		b = strconv.AppendInt(b, x.Off, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, x.Len, 10)
	}
	return string(b)
}

// ParseExtents reads a map for a file of size bytes and returns it with
// the data bytes it places. Extents must be non-empty, in order, apart,
// and inside the file; at most MaxExtents. The result is never nil.
func ParseExtents(s string, size int64) ([]Extent, int64, error) {
	return parseExtents(s, size, MaxExtents, "sparse")
}

// parseExtents is ParseExtents for a map of what (its name in errors)
// of at most max extents.
func parseExtents(s string, size int64, max uint64, what string) ([]Extent, int64, error) {
	if len(s) > 1+int(max)*2*21 {
		return nil, 0, fmt.Errorf("%s map too long", what)
	}
	f := strings.Split(s, ",")
	n, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil || n > max || uint64(len(f)) != 1+2*n {
		return nil, 0, fmt.Errorf("malformed %s map (%d fields)", what, len(f))
	}
	ext := make([]Extent, 0, n)
	var end, data int64
	for i := 1; i < len(f); i += 2 {
		off, err1 := strconv.ParseInt(f[i], 10, 64)
		l, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || off < end || l <= 0 || off > size-l {
			return nil, 0, fmt.Errorf("%s map extent %s+%s is not a new range inside the file's %d bytes", what, f[i], f[i+1], size)
		}
		ext = append(ext, Extent{off, l})
		end = off + l
		data += l
	}
	return ext, data, nil
}

// DataSize is how many bytes of a file of size bytes travel: all, or
// with a map (ext not nil) those of its extents.
func DataSize(size int64, ext []Extent) int64 {
	if ext == nil {
		return size
	}
	var n int64
	for _, x := range ext {
		n += x.Len
	}
	return n
}

// HashExtents feeds a sparse file's map into its content hash, ahead of
// its data: the end-to-end sum of a sparse file covers the map and the
// data extents (with the size, that is all of its content: holes are
// zeros), not the zeros of its holes, which would cost both sides a pass
// over the file's whole length.
func HashExtents(h io.Writer, ext []Extent) {
	var b [16]byte
	for _, x := range ext {
		binary.BigEndian.PutUint64(b[:8], uint64(x.Off))
		binary.BigEndian.PutUint64(b[8:], uint64(x.Len))
		h.Write(b[:])
	}
	if len(ext) == 0 {
		h.Write([]byte("hole")) // all hole: not the sum of an empty file
	}
}
