package source

import (
	"archive/tar"
	"io"
	"time"

	"github.com/bulkmove/bulkmove/model"
)

// tarStream writes a batch's tar stream. Most entries of a tree of small
// files have short ASCII names and small ids; their 512-byte USTAR header
// is built directly (archive/tar's general WriteHeader was 22% of the
// sender's CPU on 100,000 × 1 KiB). Other entries go through archive/tar,
// byte-compatible: the tests compare both encoders' output.
type tarStream struct {
	w   io.Writer
	tw  *tar.Writer // for headers the fast path cannot express
	blk [512]byte
	// viaTW: the current entry's header went through tw (beginExtra)
	viaTW bool
	// bare: the current entry's body went around this writer (beginBare),
	// bareLen bytes of it
	bare    bool
	bareLen int64
}

func newTarStream(w io.Writer) *tarStream { return &tarStream{w: w, tw: tar.NewWriter(w)} }

const (
	maxOctal7  = 1<<21 - 1 // largest value of a 7-digit octal field
	maxOctal11 = 1<<33 - 1 // of an 11-digit one
)

// fast reports whether e's header fits the fast path's USTAR subset.
func fast(e *model.Entry) bool {
	if len(e.Path) > 100 || e.Size > maxOctal11 || e.UID > maxOctal7 || e.GID > maxOctal7 {
		return false
	}
	if s := e.MTime / 1e9; e.MTime < 0 || s > maxOctal11 {
		return false
	}
	for i := 0; i < len(e.Path); i++ {
		if c := e.Path[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// octal writes v, which fast has checked fits, zero-padded and
// NUL-terminated, as archive/tar writes USTAR numbers (digit by digit: no
// string to allocate).
func octal(dst []byte, v int64) {
	n := len(dst) - 1
	dst[n] = 0
	for i := n - 1; i >= 0; i-- {
		dst[i] = byte('0' + v&7)
		v >>= 3
	}
}

// ustarFields is where a fast header's fields of its own end: the name,
// mode, ids, size and mtime; every byte after them but the checksum is
// the same in every fast header (ustarBlank).
const ustarFields = 148

// ustarBlank is a fast header without the fields of an entry (zeros
// there) and the sum of its bytes, the checksum counting its own field as
// spaces: a header is this, its fields written in, and the sum of their
// bytes added (a third of the block to sum, not all of it).
var ustarBlank, ustarBlankSum = func() ([512]byte, int) {
	var b [512]byte
	b[156] = tar.TypeReg
	copy(b[257:265], "ustar\x0000")
	octal(b[329:337], 0)
	octal(b[337:345], 0)
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	return b, sum
}()

// begin writes the header of regular file e and returns where its data goes.
func (t *tarStream) begin(e *model.Entry) (io.Writer, error) {
	if !fast(e) {
		t.viaTW = true // end flushes archive/tar's padding
		return t.tw, t.tw.WriteHeader(plainHeader(e))
	}
	t.blk = ustarBlank
	b := t.blk[:]
	copy(b[0:100], e.Path)
	octal(b[100:108], int64(e.Mode.Perm()))
	octal(b[108:116], int64(e.UID))
	octal(b[116:124], int64(e.GID))
	octal(b[124:136], e.Size)
	octal(b[136:148], e.MTime/1e9)
	sum := ustarBlankSum
	for _, c := range b[:ustarFields] {
		sum += int(c)
	}
	octal(b[148:155], int64(sum))
	b[155] = ' '
	_, err := t.w.Write(b)
	return t.w, err
}

// plainHeader is regular file e's header, as archive/tar writes it when
// the fast path cannot.
func plainHeader(e *model.Entry) *tar.Header {
	return &tar.Header{
		Typeflag: tar.TypeReg, Name: e.Path, Size: e.Size, Mode: int64(e.Mode.Perm()),
		ModTime: time.Unix(e.MTime/1e9, 0), Uid: int(e.UID), Gid: int(e.GID),
	}
}

// end finishes the data of e: padding to the next 512-byte block.
func (t *tarStream) end(e *model.Entry) error {
	if t.bare {
		t.bare = false
		return t.pad(t.bareLen)
	}
	if t.viaTW {
		t.viaTW = false
		return t.tw.Flush()
	}
	return t.pad(e.Size)
}

// pad writes the padding after a body of size bytes.
func (t *tarStream) pad(size int64) error {
	if r := size % 512; r != 0 {
		_, err := t.w.Write(zeroBlock[:512-r])
		return err
	}
	return nil
}

// global writes a PAX global header (the batch id) through archive/tar.
func (t *tarStream) global(records map[string]string) error {
	if err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: records}); err != nil {
		return err
	}
	return t.tw.Flush()
}

// zeroBlock is padding and the end-of-archive marker; never written to.
var zeroBlock [512]byte

// close writes the end-of-archive marker: two zero blocks.
func (t *tarStream) close() error {
	if _, err := t.w.Write(zeroBlock[:]); err != nil {
		return err
	}
	_, err := t.w.Write(zeroBlock[:])
	return err
}
