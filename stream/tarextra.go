package stream

import (
	"archive/tar"
	"io"
	"time"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// beginExtra writes the header of regular file e with what travels beside
// its data: its attributes as SCHILY.xattr records and its sparse map as
// extract.PAXSparse (the entry's size is then its data bytes). Without
// either it is begin.
func (t *tarStream) beginExtra(e *sharder.Entry, ext []wire.Extent, xs []wire.Xattr) (io.Writer, error) {
	if ext == nil && len(xs) == 0 && !e.IsRange() {
		return t.begin(e)
	}
	rec := make(map[string]string, len(xs)+2)
	size := wire.DataSize(e.Size, ext)
	if e.IsRange() {
		// One range of a split file: its bytes, and which they are.
		rec[extract.PAXRange] = extract.FormatRange(e)
		size = e.Len
	}
	for _, x := range xs {
		rec[extract.PAXXattr+x.Name] = x.Value
	}
	if ext != nil {
		rec[extract.PAXSparse] = wire.FormatExtents(ext)
	}
	t.viaTW = true // end flushes archive/tar's padding
	err := t.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: e.Path, Size: size, Mode: int64(e.Mode.Perm()),
		ModTime: time.Unix(e.MTime/1e9, 0), Uid: int(e.UID), Gid: int(e.GID), PAXRecords: rec, Format: tar.FormatPAX,
	})
	return t.tw, err
}
