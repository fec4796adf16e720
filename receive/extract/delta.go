package extract

// The block delta's receiving side (see wire/delta.go). PrepareDeltas,
// right after the quick check, makes the new version's temporary of each
// file it takes from DEST's copy (a reflink where the filesystem shares
// blocks, else copy_file_range, else read and write) and hashes that
// private copy in blocks; the hashes go to the sender, and writeDelta
// writes the blocks that come back into the temporary, which Commit
// renames into place as any file, after the sender's DeltaSum matched
// the one made here. DEST's file is never written: an interrupted pass
// leaves it whole. With --inplace the file itself is the base, patched
// where it is (deltainplace.go).

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/holes"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Deltas are a batch's delta temporaries, by entry index, and the entries
// refused before any byte of theirs was sent. A nil *Deltas has none.
type Deltas struct {
	mu    sync.Mutex
	bases map[int]*deltaBase
	fails map[int]error
}

// deltaBase is one file's temporary, a private copy of DEST's file; or,
// for a range of a split file, DEST's file itself, open; or, inPlace,
// DEST's file itself, open for writing and locked (deltainplace.go).
type deltaBase struct {
	dir     *os.File // the file's directory, where tmp is; nil for a range
	tmp     string
	inPlace bool
	// fd is tmp, open for reading and writing, -1 once taken; for a
	// range, DEST's file open for reading, whose blocks the range's
	// writer copies into the partial (rangeDelta).
	fd     int
	off    int64 // where the blocks start: a range's offset, or 0
	bs     int64
	hashed int64 // the bytes hashed: the old size, or the new if less
	hashes []wire.Sum
}

// ErrNoRoom marks a file whose delta needs a temporary copy that DEST has
// no room for.
var ErrNoRoom = errors.New("no room for the temporary copy")

// deltaStatfs is how PrepareDeltas learns the free space (tests change it).
var deltaStatfs = unix.Fstatfs

// PrepareDeltas makes the delta temporaries of the needed files of
// entries that go as a delta (Options.DeltaMin): of at least DeltaMin
// bytes and held at DEST as a regular file; a range of such a file
// (rangeBase) needs none, its partial is where its blocks go. A file whose
// temporary cannot be made goes whole; one without room for it at DEST
// (no reflink, and less free space than its size) is no longer needed
// and fails (Txn.UseDeltas) with a message saying to use --inplace. With
// Options.InPlace a file is its own base (inPlaceBase), where it can be.
func (r *Receiver) PrepareDeltas(entries []model.Entry, need []bool) *Deltas {
	if r.opt.DeltaMin <= 0 || r.opt.DryRun {
		return nil
	}
	var d *Deltas
	for i := range entries {
		e := &entries[i]
		if !need[i] || e.Kind != model.KindFile || e.Size < r.opt.DeltaMin || e.Nlink > 1 ||
			CheckName(e.Path, e.Kind) != nil || r.isWriting(e.Path) {
			continue
		}
		var b *deltaBase
		var err error
		switch {
		case e.IsRange():
			b = r.rangeBase(e)
		case r.opt.InPlace && !r.backingUp():
			if b, err = r.inPlaceBase(e); b == nil && err == nil {
				b, err = r.deltaBase(e)
			}
		default:
			b, err = r.deltaBase(e)
		}
		if b == nil && err == nil {
			continue
		}
		if d == nil {
			d = &Deltas{bases: map[int]*deltaBase{}, fails: map[int]error{}}
		}
		if err != nil {
			need[i] = false
			d.fails[i] = err
			continue
		}
		d.bases[i] = b
	}
	return d
}

// Lists returns the block lists to send for batch id, in entry order.
func (d *Deltas) Lists(id uint64, entries int) []*wire.BlockList {
	if d == nil {
		return nil
	}
	var out []*wire.BlockList
	for i := range entries {
		if b := d.bases[i]; b != nil {
			out = append(out, &wire.BlockList{ID: id, Index: i, BlockSize: b.bs, Len: b.hashed, Hashes: b.hashes})
		}
	}
	return out
}

// Failed returns the error of entry i refused before its data, or nil.
func (d *Deltas) Failed(i int) error {
	if d == nil {
		return nil
	}
	return d.fails[i]
}

// take hands entry i's temporary to its writer, once.
func (d *Deltas) take(i int) *deltaBase {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.bases[i]
	delete(d.bases, i)
	return b
}

// Close removes the temporaries no writer took (the sender sent those
// files whole, or not at all).
func (d *Deltas) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, b := range d.bases {
		b.drop()
		delete(d.bases, i)
	}
}

func (b *deltaBase) drop() {
	if b.fd >= 0 {
		unix.Close(b.fd)
		b.fd = -1
	}
	if b.dir == nil { // a range's: DEST's file, only read
		return
	}
	if !b.inPlace { // else DEST's file: what was written stays, marked
		unix.Unlinkat(int(b.dir.Fd()), b.tmp, 0)
	}
	b.dir.Close()
}

// UseDeltas gives the batch its delta temporaries (for Write) and fails
// the entries refused before their data.
func (t *Txn) UseDeltas(d *Deltas) {
	if d == nil {
		return
	}
	t.deltas = d
	for i, err := range d.fails {
		t.fail(i, wire.CodeOther, err)
	}
}

// deltaBase makes entry e's temporary from DEST's file and hashes it; nil
// and no error: e goes whole.
func (r *Receiver) deltaBase(e *model.Entry) (*deltaBase, error) {
	dpath, base := splitDir(e.Path)
	dir, err := r.openDir(dpath, 0)
	if err != nil {
		return nil, nil
	}
	dfd := int(dir.Fd())
	if !regularAt(dfd, base) {
		dir.Close()
		return nil, nil
	}
	old, err := unix.Openat(dfd, base, readFlags, 0)
	if err != nil {
		dir.Close()
		return nil, nil
	}
	defer unix.Close(old)
	var st unix.Stat_t
	if unix.Fstat(old, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 {
		dir.Close()
		return nil, nil
	}
	b := &deltaBase{dir: dir, tmp: tmpName(), bs: wire.BlockSize(e.Size), hashed: min(st.Size, e.Size)}
	b.fd, err = unix.Openat(dfd, b.tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		dir.Close()
		return nil, nil
	}
	if err := cloneOrCopy(b.fd, old, st.Size, func(alloc int64) error { return r.roomFor(dfd, e, alloc, st.Size) }); err != nil {
		b.drop()
		if errors.Is(err, ErrNoRoom) {
			return nil, err
		}
		return nil, nil
	}
	b.hashes = make([]wire.Sum, wire.BlockCount(b.hashed, b.bs))
	if err := r.hashBlocks(b); err != nil {
		b.drop()
		return nil, nil
	}
	return b, nil
}

// rangeBase opens DEST's file of range e and hashes the blocks of its
// bytes in the range (from the range's offset, up to its end or the old
// file's); nil: the range goes whole (DEST holds no regular file there,
// or one that ends before the range begins). Nothing is copied yet: the
// range's writer copies the blocks that match into the partial, each
// checked against its hash again as it goes (rangeDelta), so the partial
// never holds a byte of the old version (another copy of the range may be
// writing into it at once), and a DEST changed meanwhile fails the range.
func (r *Receiver) rangeBase(e *model.Entry) *deltaBase {
	if checkRange(e) != nil {
		return nil
	}
	dpath, base := splitDir(e.Path)
	dir, err := r.openDir(dpath, 0)
	if err != nil {
		return nil
	}
	defer dir.Close()
	if !regularAt(int(dir.Fd()), base) {
		return nil
	}
	old, err := unix.Openat(int(dir.Fd()), base, readFlags, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(old, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= e.Off {
		unix.Close(old)
		return nil
	}
	b := &deltaBase{fd: old, off: e.Off, bs: wire.BlockSize(e.Size), hashed: min(st.Size-e.Off, e.Len)}
	b.hashes = make([]wire.Sum, wire.BlockCount(b.hashed, b.bs))
	if err := r.hashBlocks(b); err != nil {
		b.drop()
		return nil
	}
	return b
}

// regularAt says whether name in dfd is a regular file, looked at before
// it is opened: opening a device can act (a tape rewinds), and DEST's
// name may hold one where SRC has a file. What is opened is checked
// again by its fstat; a name swapped in between by a local user can only
// be a FIFO (O_NONBLOCK), not a device.
func regularAt(dfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// roomFor says whether DEST (dfd's filesystem) has room for a copy of
// e's old version of size bytes, alloc of them data (the rest holes), and
// its growth, else why not, and what to do.
func (r *Receiver) roomFor(dfd int, e *model.Entry, alloc, size int64) error {
	var fs unix.Statfs_t
	if deltaStatfs(dfd, &fs) != nil {
		return nil // unknown: the copy will tell
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	if want := alloc + max(0, e.Size-size); free < want {
		return fmt.Errorf("receive %s: %w of its %s (%s free at DEST): the new version is built beside the old one and renamed into place; %s", e.Path, ErrNoRoom, units.Size(want), units.Size(free), r.noRoomHint())
	}
	return nil
}

// cloneOrCopy fills dst with src's size bytes: a reflink (FICLONE) where
// the filesystem shares blocks, else, once room says there is room for
// the bytes of src's data (its holes stay holes in dst), by
// copy_file_range, else by read and write.
func cloneOrCopy(dst, src int, size int64, room func(alloc int64) error) error {
	if fileClone(dst, src) == nil {
		return nil
	}
	data := holes.Data(src, 0, size, wire.MaxDeltaExtents)
	if data == nil {
		data = []wire.Extent{{Off: 0, Len: size}}
	}
	if err := room(wire.DataSize(size, data)); err != nil {
		return err
	}
	for _, x := range data {
		if err := copyExtent(dst, src, x.Off, x.Len); err != nil {
			return err
		}
	}
	return unix.Ftruncate(dst, size)
}

// copyExtent copies n bytes of src at off to dst at off: by
// copy_file_range, else by read and write.
func copyExtent(dst, src int, off, n int64) error {
	end := off + n
	if _, err := unix.Seek(src, off, io.SeekStart); err == nil {
		if _, err := unix.Seek(dst, off, io.SeekStart); err == nil {
			for off < end {
				m, err := copyFileRange(src, dst, int(min(end-off, 1<<30)))
				if err == unix.EINTR {
					continue
				}
				if err != nil || m == 0 {
					break // not here (EXDEV, ENOSYS, EINVAL): read and write
				}
				off += int64(m)
			}
		}
	}
	if off == end {
		return nil
	}
	buf := make([]byte, min(1<<20, end-off))
	for off < end {
		m, err := unix.Pread(src, buf[:min(int64(len(buf)), end-off)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if m == 0 {
			return io.ErrUnexpectedEOF
		}
		if err := pwriteAll(dst, buf[:m], off); err != nil {
			return err
		}
		off += int64(m)
	}
	return nil
}

// hashBlocks hashes b's temporary in its blocks, several at once: the
// receiver's --io-concurrency, or a few cores where it writes one file
// at a time. A block that lies wholly in a hole is not read: it hashes as
// zeros.
func (r *Receiver) hashBlocks(b *deltaBase) error {
	data := holes.Data(b.fd, b.off, b.off+b.hashed, wire.MaxDeltaExtents)
	width := r.io.Width()
	if r.opt.IOConcurrency <= 0 {
		width = max(width, min(4, runtime.GOMAXPROCS(0)))
	}
	// Each task is a chunk of blocks, read at once where they hold data.
	per := wire.ChunkBlocks(b.bs)
	chunks := (len(b.hashes) + per - 1) / per
	width = min(width, chunks)
	bufs := make([][]byte, max(width, 1))
	var mu sync.Mutex
	var first error
	ioconc.ForEach(chunks, width, func(w, c int) {
		for k, end := c*per, min((c+1)*per, len(b.hashes)); k < end; {
			off := int64(k) * b.bs
			j, n := holes.DataBlocks(data, b.off, b.hashed, b.bs, k, end)
			if j == k { // in a hole
				b.hashes[k] = wire.ZeroHash(min(b.bs, b.hashed-off))
				k++
				continue
			}
			if bufs[w] == nil {
				bufs[w] = make([]byte, int64(per)*b.bs)
			}
			p := bufs[w][:n]
			if err := preadFull(b.fd, p, b.off+off); err != nil {
				mu.Lock()
				first = cmpOr(first, err)
				mu.Unlock()
				return
			}
			wire.HashBlocks(b.hashes[k:j], p, b.bs)
			k = j
		}
	})
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func preadFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// writeDelta writes entry i, sent as the extents ext of its blocks, into
// its temporary b: each block hashed as it is written, the file cut to
// its size, the blocks not sent hashed already (or, the last one cut
// short, hashed now), and their DeltaSum kept for Commit to compare with
// the sender's.
func (t *Txn) writeDelta(i int, e *model.Entry, src io.Reader, x *FileData, b *deltaBase) error {
	want := wire.DataSize(e.Size, x.Delta)
	discard := b.drop
	td, base := t.txnDir(e.Path)
	if td.err != nil {
		discard()
		t.failErr(i, "create directory for", e.Path, td.err)
		return t.drain(src, want)
	}
	fd := b.fd
	if b.inPlace {
		// Marked before the first byte changes: see deltainplace.go.
		if err := markTorn(int(b.dir.Fd()), base, e); err != nil {
			discard()
			t.failErr(i, "mark as being patched in place", e.Path, err)
			return t.drain(src, want)
		}
		t.r.setWriting(e.Path, true)
		discard = func() {
			t.r.setWriting(e.Path, false)
			b.drop()
		}
	}
	nb := wire.BlockCount(e.Size, b.bs)
	got := make([]wire.Sum, nb)
	have := make([]bool, nb)
	chunk := int64(wire.ChunkBlocks(b.bs)) * b.bs
	buf := make([]byte, min(chunk, max(e.Size, 1)))
	var n int64
	for _, ext := range x.Delta {
		for off := ext.Off; off < ext.Off+ext.Len; off += chunk {
			p := buf[:min(chunk, ext.Off+ext.Len-off)]
			k, err := io.ReadFull(src, p)
			n += int64(k)
			if err != nil {
				discard()
				t.fail(i, wire.CodeOther, fmt.Errorf("receive %s: %w", e.Path, err))
				return err
			}
			t.r.limit.Wait(len(p))
			from, to := off/b.bs, (off+int64(len(p))+b.bs-1)/b.bs
			wire.HashBlocks(got[from:to], p, b.bs)
			for k := from; k < to; k++ {
				have[k] = true
			}
			if err := t.writeBlock(fd, p, off); err != nil {
				discard()
				t.failErr(i, "write", e.Path, err)
				return t.drain(src, want-n)
			}
		}
	}
	for _, z := range x.Zero {
		if err := zeroExtent(fd, z.Off, z.Len, buf); err != nil {
			discard()
			t.failErr(i, "punch a hole in", e.Path, err)
			return nil
		}
		zeroHashes(got, have, z, b.bs)
	}
	if err := unix.Ftruncate(fd, e.Size); err != nil {
		discard()
		t.failErr(i, "truncate", e.Path, err)
		return nil
	}
	for k := range got {
		if have[k] {
			continue
		}
		off := int64(k) * b.bs
		l := min(b.bs, e.Size-off)
		if k < len(b.hashes) && min(b.bs, b.hashed-off) == l {
			got[k] = b.hashes[k]
			continue
		}
		// The new end cuts this block of the old copy: what it holds now.
		if err := preadFull(fd, buf[:l], off); err != nil {
			discard()
			t.failErr(i, "read back", e.Path, err)
			return nil
		}
		got[k] = wire.BlockHash(buf[:l])
	}
	if err := t.setMetaWith(dirat.Calls{}, fd, e, -1, true); err != nil {
		discard()
		t.failErr(i, "set metadata of", e.Path, err)
		return nil
	}
	if err := t.setXattrs(fd, -1, "", e, x.xattrs()); err != nil {
		discard()
		t.fail(i, Code(err), err)
		return nil
	}
	if t.r.opt.Fsync {
		if err := unix.Fsync(fd); err != nil {
			discard()
			t.failErr(i, "fsync", e.Path, err)
			return nil
		}
	}
	b.fd = -1
	if b.inPlace {
		// Held open, and locked, until Commit compares the sums.
		t.settle(pendingFile{index: i, dir: b.dir, fd: fd, base: base, sum: wire.DeltaSum(e.Size, b.bs, got), summed: true, held: -1, inPlace: true}, e.Size, nil)
		return nil
	}
	if err := unix.Close(fd); err != nil {
		discard()
		t.failErr(i, "close", e.Path, err)
		return nil
	}
	b.dir.Close()
	t.settle(pendingFile{index: i, dir: td.f, tmp: b.tmp, fd: -1, base: base, sum: wire.DeltaSum(e.Size, b.bs, got), summed: true, held: -1}, e.Size, nil)
	return nil
}

// zeroExtent makes n bytes of fd from off zeros: a hole, or where the
// filesystem cannot punch one, zeros written from buf (cleared here).
func zeroExtent(fd int, off, n int64, buf []byte) error {
	return punchOr(fd, off, n, func() error {
		clear(buf)
		for end := off + n; off < end; {
			p := buf[:min(int64(len(buf)), end-off)]
			if err := pwriteAll(fd, p, off); err != nil {
				return err
			}
			off += int64(len(p))
		}
		return nil
	})
}

// punchOr punches a hole of n bytes of fd at off, or where the filesystem
// cannot, calls write to write zeros there.
func punchOr(fd int, off, n int64, write func() error) error {
	err := punchHole(fd, off, n)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS || err == unix.EINVAL {
		return write()
	}
	return err
}

// holePage is the run of zeros a block written with --sparse leaves a
// hole for: a page, the holes' granularity on tmpfs, ext4 and XFS.
const holePage = 4096

// writeBlock writes the block p at off into fd; with --sparse, its whole
// pages of zeros as holes (punched: what lies under them may be old
// data), so that a block sent for some data keeps SRC's holes beside it.
func (t *Txn) writeBlock(fd int, p []byte, off int64) error {
	if !t.r.opt.Sparse {
		return pwriteAll(fd, p, off)
	}
	var zero [holePage]byte
	chunk := func(i int) int { return min(holePage-int((off+int64(i))%holePage), len(p)-i) }
	isZero := func(i int) bool { return chunk(i) == holePage && bytes.Equal(p[i:i+holePage], zero[:]) }
	for len(p) > 0 {
		d := 0
		for d < len(p) && !isZero(d) {
			d += chunk(d)
		}
		z := d
		for z < len(p) && isZero(z) {
			z += chunk(z)
		}
		if d > 0 {
			if err := pwriteAll(fd, p[:d], off); err != nil {
				return err
			}
		}
		if z > d {
			run, at := p[d:z], off+int64(d)
			if err := punchOr(fd, at, int64(len(run)), func() error { return pwriteAll(fd, run, at) }); err != nil {
				return err
			}
		}
		p, off = p[z:], off+int64(z)
	}
	return nil
}

// zeroHashes sets the hashes in got (counted from the extents' origin)
// of the blocks of z, zeros now, and marks them had.
func zeroHashes(got []wire.Sum, had []bool, z wire.Extent, bs int64) {
	for off := z.Off; off < z.Off+z.Len; off += bs {
		got[off/bs] = wire.ZeroHash(min(bs, z.Off+z.Len-off))
		if had != nil {
			had[off/bs] = true
		}
	}
}

// deltaExtra reads a tar entry's PAXDelta map, for entry j: only a file
// (or range) with a delta base may carry one, not with a sparse map, and
// its extents, counted from the entry's first byte, must carry the
// header's size; and its PAXDeltaZero map, of blocks apart from those.
func (t *Txn) deltaExtra(hdr *tar.Header, j int, x *FileData) (*FileData, error) {
	v, ok := hdr.PAXRecords[wire.PAXDelta]
	if !ok {
		if _, ok := hdr.PAXRecords[wire.PAXDeltaZero]; ok {
			return nil, errors.New("blocks of zeros, but no block delta")
		}
		return x, nil
	}
	e := &t.entries[j]
	var b *deltaBase
	if t.deltas != nil {
		t.deltas.mu.Lock()
		b = t.deltas.bases[j]
		t.deltas.mu.Unlock()
	}
	if b == nil {
		return nil, errors.New("a block delta, but no block list was sent for it")
	}
	if x != nil && x.Extents != nil {
		return nil, errors.New("a block delta and a sparse map")
	}
	ext, data, err := wire.ParseDelta(v, e.DataLen(), b.bs)
	if err != nil {
		return nil, err
	}
	if data != hdr.Size {
		return nil, fmt.Errorf("its delta map places %d bytes, its header declares %d", data, hdr.Size)
	}
	var zero []wire.Extent
	if v, ok := hdr.PAXRecords[wire.PAXDeltaZero]; ok {
		if zero, err = wire.ParseDeltaZero(v, e.DataLen(), b.bs, ext); err != nil {
			return nil, err
		}
	}
	if x == nil {
		x = &FileData{}
	}
	x.Delta, x.Zero = ext, zero
	return x, nil
}

// rangeDelta writes range e, sent as the extents ext of its blocks (from
// src) and zero of its blocks of zeros, into its partial fd at the
// range's offset, the blocks not sent copied from DEST's file (b) and checked against the hashes that went to
// the sender: it returns the bytes read from src, the range's DeltaSum,
// and a read error (src) or a write error (the partial, or a DEST block
// that no longer hashes as it did: DEST changed meanwhile, and the range
// fails to go again).
func (t *Txn) rangeDelta(fd int, e *model.Entry, src io.Reader, ext, zero []wire.Extent, b *deltaBase) (n int64, sum wire.Sum, rerr, werr error) {
	nb := wire.BlockCount(e.Len, b.bs)
	got := make([]wire.Sum, nb)
	per := int64(wire.ChunkBlocks(b.bs))
	buf := make([]byte, min(per*b.bs, e.Len))
	next := int64(0) // the first block not yet written
	// The range's writes take turns with the other ranges of the file
	// written at once (fileLocks): its reads and hashing need not.
	fl, done := t.r.writers.hold(fd)
	defer done()
	write := func(p []byte, off int64) error { return fl.do(func() error { return t.writeBlock(fd, p, off) }) }
	// keep copies the blocks from next to end from DEST's file, a chunk
	// at a time, each hashed again and compared before it is written.
	keep := func(end int64) error {
		for next < end {
			off := next * b.bs
			j := min(end, next+per)
			p := buf[:min(j*b.bs, e.Len)-off]
			if int(j-1) >= len(b.hashes) || min(j*b.bs, e.Len) != min(j*b.bs, b.hashed) {
				return fmt.Errorf("the block at %d was neither sent nor in DEST's file", e.Off+off)
			}
			if err := preadFull(b.fd, p, e.Off+off); err != nil {
				return fmt.Errorf("read DEST's file: %w", err)
			}
			wire.HashBlocks(got[next:j], p, b.bs)
			for k := next; k < j; k++ {
				if got[k] != b.hashes[k] {
					return fmt.Errorf("DEST's file changed while its blocks were used (the block at %d)", e.Off+k*b.bs)
				}
			}
			if err := write(p, e.Off+off); err != nil {
				return err
			}
			next = j
		}
		return nil
	}
	for len(ext) > 0 || len(zero) > 0 {
		if len(zero) > 0 && (len(ext) == 0 || zero[0].Off < ext[0].Off) {
			z := zero[0]
			zero = zero[1:]
			if werr = keep(z.Off / b.bs); werr != nil {
				return n, sum, nil, werr
			}
			if werr = fl.do(func() error { return zeroExtent(fd, e.Off+z.Off, z.Len, buf) }); werr != nil {
				return n, sum, nil, werr
			}
			zeroHashes(got, nil, z, b.bs)
			next = (z.Off + z.Len + b.bs - 1) / b.bs
			continue
		}
		x := ext[0]
		ext = ext[1:]
		if werr = keep(x.Off / b.bs); werr != nil {
			return n, sum, nil, werr
		}
		for off := x.Off; off < x.Off+x.Len; off += per * b.bs {
			p := buf[:min(per*b.bs, x.Off+x.Len-off)]
			k, err := io.ReadFull(src, p)
			n += int64(k)
			if err != nil {
				return n, sum, err, nil
			}
			t.r.limit.Wait(len(p))
			wire.HashBlocks(got[off/b.bs:(off+int64(len(p))+b.bs-1)/b.bs], p, b.bs)
			if err := write(p, e.Off+off); err != nil {
				return n, sum, nil, err
			}
		}
		next = (x.Off + x.Len + b.bs - 1) / b.bs
	}
	if werr = keep(nb); werr != nil {
		return n, sum, nil, werr
	}
	return n, wire.DeltaSum(e.Len, b.bs, got), nil, nil
}
