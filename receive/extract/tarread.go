package extract

// Reading a batch's tar stream: a fast path for the headers bulkmove's
// sender writes, archive/tar for every other.

import (
	"archive/tar"
	"bytes"
	"io"
	"time"

	"github.com/bulkmove/bulkmove/internal/iocount"
)

// tarReader reads a batch's tar stream, as archive/tar's Reader does. The
// headers that bulkmove's sender builds itself on its fast path (a
// regular file with a name of at most 100 bytes, plain USTAR, octal
// numbers, no PAX records) are parsed here, in one pass over the block;
// every other one (the batch's global header, PAX records, long names, the
// end of the archive, anything odd or damaged) goes to an archive/tar
// Reader that starts at the same block. archive/tar's general path, which
// tells formats apart by scanning each block for non-ASCII bytes among
// other checks, is a large share of the receiver's CPU where files are
// small.
// FuzzTarReader checks that both read every input alike.
type tarReader struct {
	r   io.Reader
	blk [512]byte
	// The fast path's entry: body bytes not read yet, then padding.
	body, pad int64
	// Or archive/tar's: its Reader, and what it read of r (with the block
	// it started from, every entry starts at a multiple of 512).
	tr *tar.Reader
	cr iocount.Reader
	// trSize is the size archive/tar's header declared, and trFresh says
	// nothing of its body was read yet: SpliceTo may take it from here.
	trSize  int64
	trFresh bool
	// hdr is the fast path's header, valid until the next Next; want, if
	// set, is the name the caller expects next: a header with that name
	// takes this string rather than a copy of its bytes.
	hdr  tar.Header
	want string
}

func newTarReader(r io.Reader) *tarReader { return &tarReader{r: r} }

// Next advances to the next entry: io.EOF at the end of the archive. The
// header is valid until the next call.
func (t *tarReader) Next() (*tar.Header, error) {
	if err := t.skip(); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(t.r, t.blk[:]); err != nil {
		return nil, err // io.EOF: exactly 0 bytes read, as archive/tar
	}
	if h, ok := t.fast(); ok {
		t.body, t.pad = h.Size, -h.Size&511
		return h, nil
	}
	t.cr = iocount.Reader{R: t.r}
	t.tr = tar.NewReader(io.MultiReader(bytes.NewReader(t.blk[:]), &t.cr))
	h, err := t.tr.Next()
	t.trSize, t.trFresh = 0, err == nil
	if err == nil {
		t.trSize = h.Size
	}
	return h, err
}

// Read reads the current entry's body.
func (t *tarReader) Read(p []byte) (int, error) {
	if t.tr != nil {
		t.trFresh = false
		return t.tr.Read(p)
	}
	if t.body <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > t.body {
		p = p[:t.body]
	}
	n, err := t.r.Read(p)
	t.body -= int64(n)
	if err == io.EOF && t.body > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// peeker is a buffered stream whose buffer can be read in place:
// *bufio.Reader, and SocketReader, which embeds one.
type peeker interface {
	Buffered() int
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
}

// buffered returns the current entry's body, if it is n bytes, all of
// them unread and already in the buffer of the stream below, without
// consuming it: valid until the next read, and consumed with take. Else
// nil.
func (t *tarReader) buffered(n int64) []byte {
	p, ok := t.r.(peeker)
	if !ok || t.tr != nil || t.body != n || int64(p.Buffered()) < n {
		return nil
	}
	b, err := p.Peek(int(n))
	if err != nil {
		return nil
	}
	return b
}

// take consumes n bytes of the current entry's body that buffered returned.
func (t *tarReader) take(n int) {
	m, _ := t.r.(peeker).Discard(n) // (buffered: all of them)
	t.body -= int64(m)
}

// SpliceTo moves n bytes of the current entry's body into fd, when the
// stream below is a Splicer (see canSplice).
func (t *tarReader) SpliceTo(fd int, n int64) (taken int64, rerr, werr error) {
	if t.tr != nil {
		// archive/tar read the header (PAX records: a range, attributes)
		// and not a byte beyond it; the body lies bare in the stream, as
		// after a header of the fast path. (Callers take only regular
		// files without a sparse map: ExtractTar.)
		t.body, t.pad, t.tr = t.trSize, -t.trSize&511, nil
	}
	taken, rerr, werr = t.r.(Splicer).SpliceTo(fd, min(n, t.body))
	t.body -= taken
	if rerr == nil && werr == nil && taken < n {
		rerr = io.ErrUnexpectedEOF
	}
	return taken, rerr, werr
}

// splices says whether SpliceTo can take the current entry's body: over
// a Splicer, after a header of the fast path, or one of archive/tar's
// whose body nothing read yet.
func (t *tarReader) splices() bool {
	_, ok := t.r.(Splicer)
	return ok && (t.tr == nil || t.trFresh)
}

// skip moves past what is left of the current entry: its body, then its
// padding (cut short, io.EOF: archive/tar's errors, for the same input).
func (t *tarReader) skip() error {
	if t.tr != nil {
		if _, err := io.Copy(io.Discard, t.tr); err != nil {
			return err
		}
		t.pad = -(512 + t.cr.N) & 511
		t.body, t.tr = 0, nil
	}
	if t.body > 0 {
		n := t.body
		t.body = 0
		if k, err := io.CopyN(io.Discard, t.r, n); err != nil {
			if err == io.EOF && k < n {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	if t.pad > 0 {
		// Into the block the next header takes (io.CopyN would allocate
		// a reader for each entry).
		n := int(t.pad)
		t.pad = 0
		if k, err := io.ReadFull(t.r, t.blk[:n]); err != nil && k < n {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF // cut short: as archive/tar says it
			}
			return err
		}
	}
	return nil
}

// fast parses the block if it is a header of the sender's fast path.
func (t *tarReader) fast() (*tar.Header, bool) {
	b := &t.blk
	// (A "tar\0" trailer makes archive/tar read it as star, with times.)
	if b[156] != tar.TypeReg || string(b[257:265]) != "ustar\x0000" || b[345] != 0 || b[0] == 0 || string(b[508:512]) == "tar\x00" {
		return nil, false
	}
	var sum int64
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	chk, ok1 := octal(b[148:156])
	size, ok2 := octal(b[124:136])
	mode, ok3 := octal(b[100:108])
	uid, ok4 := octal(b[108:116])
	gid, ok5 := octal(b[116:124])
	mtime, ok6 := octal(b[136:148])
	major, ok7 := octal(b[329:337])
	minor, ok8 := octal(b[337:345])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8) || chk != sum {
		return nil, false
	}
	name := b[0:100]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	t.hdr = tar.Header{
		Typeflag: tar.TypeReg,
		Name:     t.nameOf(name),
		Linkname: cstring(b[157:257]),
		Size:     size,
		Mode:     mode,
		Uid:      int(uid),
		Gid:      int(gid),
		ModTime:  time.Unix(mtime, 0),
		Uname:    cstring(b[265:297]),
		Gname:    cstring(b[297:329]),
		Devmajor: major,
		Devminor: minor,
		// (Format, which archive/tar gives from a further scan of the
		// block, is left out: nothing here reads it.)
	}
	return &t.hdr, true
}

// nameOf is the header name b as a string: want if it is that name (no
// copy to allocate), else a copy.
func (t *tarReader) nameOf(b []byte) string {
	if string(b) == t.want {
		return t.want
	}
	return string(b)
}

// octal parses a numeric field as archive/tar does one that is not
// base-256: octal digits between leading and trailing spaces and NULs
// (none: 0). ok is false for anything else, which archive/tar then judges.
func octal(f []byte) (v int64, ok bool) {
	f = bytes.Trim(f, " \x00")
	if len(f) > 21 { // more than 63 bits
		return 0, false
	}
	for _, c := range f {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v<<3 | int64(c-'0')
	}
	return v, true
}

// cstring is a string field up to its first NUL.
func cstring(f []byte) string {
	if i := bytes.IndexByte(f, 0); i >= 0 {
		f = f[:i]
	}
	return string(f)
}
