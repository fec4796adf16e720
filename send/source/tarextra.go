package source

import (
	"archive/tar"
	"bytes"
	"io"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// beginExtra writes the header of regular file e with what travels beside
// its data: its attributes as SCHILY.xattr records and its sparse map as
// wire.PAXSparse (the entry's size is then its data bytes). Without
// either it is begin.
func (t *tarStream) beginExtra(e *model.Entry, ext []wire.Extent, xs []wire.Xattr) (io.Writer, error) {
	if ext == nil && len(xs) == 0 && !e.IsRange() {
		return t.begin(e)
	}
	t.viaTW = true // end flushes archive/tar's padding
	return t.tw, t.writeExtraHeader(e, ext, xs)
}

// writeExtraHeader writes beginExtra's PAX header through archive/tar.
func (t *tarStream) writeExtraHeader(e *model.Entry, ext []wire.Extent, xs []wire.Xattr) error {
	rec := make(map[string]string, len(xs)+2)
	size := wire.DataSize(e.Size, ext)
	if e.IsRange() {
		// One range of a split file: its bytes, and which they are.
		rec[wire.PAXRange] = wire.FormatRange(e)
		size = e.Len
	}
	for _, x := range xs {
		rec[wire.PAXXattr+x.Name] = x.Value
	}
	if ext != nil {
		rec[wire.PAXSparse] = wire.FormatExtents(ext)
	}
	h := plainHeader(e)
	h.Size, h.PAXRecords, h.Format = size, rec, tar.FormatPAX
	return t.tw.WriteHeader(h)
}

// beginDelta writes the header of regular file e (or of one range of it)
// sent as the block delta ext (wire.PAXDelta) and its blocks of zeros
// (wire.PAXDeltaZero), with its attributes: the entry's size is ext's
// bytes.
func (t *tarStream) beginDelta(e *model.Entry, ext, zero []wire.Extent, xs []wire.Xattr) (io.Writer, error) {
	t.viaTW = true // end flushes archive/tar's padding
	rec := make(map[string]string, len(xs)+1)
	for _, x := range xs {
		rec[wire.PAXXattr+x.Name] = x.Value
	}
	rec[wire.PAXDelta] = wire.FormatExtents(ext) // (a range's: from its offset)
	if len(zero) > 0 {
		rec[wire.PAXDeltaZero] = wire.FormatExtents(zero)
	}
	if e.IsRange() {
		rec[wire.PAXRange] = wire.FormatRange(e)
	}
	h := plainHeader(e)
	h.Size, h.PAXRecords, h.Format = wire.DataSize(e.DataLen(), ext), rec, tar.FormatPAX
	return t.tw, t.tw.WriteHeader(h)
}

// beginBare writes the header of regular file e, with its attributes but
// no sparse map, for a body that goes to the stream without passing
// through this writer (sendfile): archive/tar, which counts the bytes of
// each body, renders the header into a buffer of its own, and end pads
// the body to its block.
func (t *tarStream) beginBare(e *model.Entry, xs []wire.Xattr) (io.Writer, error) {
	t.bare, t.bareLen = true, e.DataLen()
	if len(xs) == 0 && !e.IsRange() && fast(e) {
		return t.begin(e)
	}
	var hdr bytes.Buffer
	hw := tar.NewWriter(&hdr)
	var err error
	if len(xs) == 0 && !e.IsRange() {
		err = hw.WriteHeader(plainHeader(e))
	} else {
		// The same records as beginExtra's, through a writer thrown away
		// once the header is out.
		err = (&tarStream{w: &hdr, tw: hw}).writeExtraHeader(e, nil, xs)
	}
	if err != nil {
		return nil, err
	}
	_, err = t.w.Write(hdr.Bytes())
	return t.w, err
}
