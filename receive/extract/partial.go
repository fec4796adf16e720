package extract

// Ranges of split files.
//
// A file larger than the sender's split size travels as ranges (an
// Entry's Off and Len), each in its own batch, which any stream may carry:
// several streams, even several agent processes (a hub restarted after a
// crash), write one file at once. Every range of one version of a file
// (path, size, mtime) lands in one named temporary in the target
// directory, the partial, whose name is derived from that version
// (partName), so that whoever receives a range finds it, and a rerun finds
// what an interrupted run left.
//
// The partial holds the file's data at its offsets (each range
// preallocated as its data arrive, as a whole file's: see copyAllocated)
// and, past the file's size, a trailer that lists
// the ranges landed so far:
//
//	magic "BMPART1\n", size int64, mtime int64, n uint32, 4 zero bytes,
//	n × (off int64, len int64), sorted by offset, disjoint
//
// all little-endian. The trailer is read and rewritten under an exclusive
// flock of the partial, which orders the K writers of one file whatever
// process they are in. A range is written (pwrite at its offset, hashed
// as it arrives) without the lock, then, at its batch's commit and only if
// its hash is the sender's, recorded in the trailer: only then is it
// acknowledged. The commit that records the last missing range truncates
// the trailer away, applies the file's metadata and renames the partial
// into place (with --fsync, after fsync).
//
// Need answers "not needed" for a range the trailer already lists (a
// range whose acknowledgement was lost, a resumed run), and for every range
// of a file whose final name is up to date. A range the sender withdraws
// (the source changed while read) discards the whole partial: ranges of
// two versions never mix, and nothing of a changed file lands. The sender's
// journal does not record ranges: the trailer is the record, so a partial
// lost meanwhile (removed by hand, or swept) only means its ranges go
// again.
//
// A late copy of a range (given to a stream again after its first stream
// was cut, and applied by either after the other completed the file)
// begins no partial: a range of a file complete under its final name (of
// its size and mtime where the check mode counts that as up to date, or
// completed by this receiver from this version's partial, whatever the
// mode) is acknowledged as landed, and a partial found to be of no use at
// its lock or at its commit is removed, since nothing else ever would. A
// copy still writing into the partial when another completed it writes
// into the file in place (the same bytes): it sets the file's metadata
// again once done, as the completing writer sets the mtime again after the
// rename, so the file ends with the sender's whichever finishes last.
//
// Each write refreshes the partial's mtime, so the sweep of stale
// temporaries (where it runs: named temporaries, older than staleTemp)
// leaves a partial alone while ranges keep arriving.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// MaxRanges bounds the ranges of one file (the sender cuts larger ones).
const MaxRanges = 1 << 16

const (
	partMagic   = "BMPART1\n"
	partHead    = 32 // magic, size, mtime, count, padding
	partPrefix  = TempPrefix + "part."
	partRecSize = 16
)

// partName is the partial's name for version e of the file base.
func partName(base string, e *model.Entry) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(e.Size))
	binary.LittleEndian.PutUint64(b[8:], uint64(e.MTime))
	h := xxh3.HashString128(base + "\x00" + string(b[:]))
	return partPrefix + fmt.Sprintf("%016x%016x", h.Hi, h.Lo)
}

type span struct{ off, len int64 }

// checkRange refuses a range that does not lie within its file.
func checkRange(e *model.Entry) error {
	if e.Off < 0 || e.Len <= 0 || e.Off > e.Size-e.Len {
		return fmt.Errorf("range of %d bytes at offset %d does not lie within the file's %d bytes", e.Len, e.Off, e.Size)
	}
	return nil
}

// readTrailer reads the landed ranges of the partial fd (of st) for e.
func readTrailer(fd int, st *unix.Stat_t, e *model.Entry) ([]span, error) {
	if st.Size < e.Size+partHead {
		return nil, errors.New("partial file without its record of ranges")
	}
	var h [partHead]byte
	if _, err := unix.Pread(fd, h[:], e.Size); err != nil {
		return nil, err
	}
	if string(h[:8]) != partMagic || int64(binary.LittleEndian.Uint64(h[8:])) != e.Size || int64(binary.LittleEndian.Uint64(h[16:])) != e.MTime {
		return nil, errors.New("partial file of another version of the file")
	}
	n := int64(binary.LittleEndian.Uint32(h[24:]))
	if n > MaxRanges || st.Size != e.Size+partHead+n*partRecSize {
		return nil, errors.New("partial file with a damaged record of ranges")
	}
	b := make([]byte, n*partRecSize)
	if n > 0 {
		if m, err := unix.Pread(fd, b, e.Size+partHead); err != nil || int64(m) != int64(len(b)) {
			return nil, fmt.Errorf("read the record of ranges: %v", err)
		}
	}
	spans := make([]span, n)
	for k := range spans {
		spans[k] = span{int64(binary.LittleEndian.Uint64(b[k*16:])), int64(binary.LittleEndian.Uint64(b[k*16+8:]))}
		if s := spans[k]; s.off < 0 || s.len <= 0 || s.off > e.Size-s.len || k > 0 && spans[k-1].off+spans[k-1].len > s.off {
			return nil, errors.New("partial file with a damaged record of ranges")
		}
	}
	return spans, nil
}

// writeTrailer records spans in the partial fd of e.
func writeTrailer(fd int, e *model.Entry, spans []span) error {
	b := make([]byte, partHead+len(spans)*partRecSize)
	copy(b, partMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(e.Size))
	binary.LittleEndian.PutUint64(b[16:], uint64(e.MTime))
	binary.LittleEndian.PutUint32(b[24:], uint32(len(spans)))
	for k, s := range spans {
		binary.LittleEndian.PutUint64(b[partHead+k*16:], uint64(s.off))
		binary.LittleEndian.PutUint64(b[partHead+k*16+8:], uint64(s.len))
	}
	if err := pwriteAll(fd, b, e.Size); err != nil {
		return err
	}
	return unix.Ftruncate(fd, e.Size+int64(len(b)))
}

func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		m, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[m:], off+int64(m)
	}
	return nil
}

// relate says how range e stands to the landed spans: already there
// (inside one span), overlapping one in part (a hostile or confused
// sender), or new.
func relate(spans []span, e *model.Entry) (landed, overlap bool) {
	for _, s := range spans {
		if s.off <= e.Off && e.Off+e.Len <= s.off+s.len {
			return true, false
		}
		if s.off < e.Off+e.Len && e.Off < s.off+s.len {
			return false, true
		}
	}
	return false, false
}

// complete reports whether spans cover [0, size).
func complete(spans []span, size int64) bool {
	end := int64(0)
	for _, s := range spans {
		if s.off != end {
			return false
		}
		end += s.len
	}
	return end == size
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// errPartPlaced and errPartGone say that the partial openPart opened was
// completed (it is the file under its final name now), or discarded,
// while openPart waited for its lock.
var (
	errPartPlaced = errors.New("the partial file was completed meanwhile")
	errPartGone   = errors.New("the partial file was discarded meanwhile")
)

// openPart opens (with create, creates) the partial name in dfd for e
// (whose file's name is base), locked exclusively, and returns its landed
// ranges. The caller unlocks (or closes) fd.
func openPart(dfd int, name, base string, e *model.Entry, create bool) (fd int, spans []span, err error) {
	flags := unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if create {
		flags |= unix.O_CREAT
	}
	fd, err = unix.Openat(dfd, name, flags, 0o600)
	if err != nil {
		return -1, nil, err
	}
	if err := flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	if !sameInode(dfd, name, fd) {
		// Renamed into place or removed by whoever held the lock: what
		// fd holds is no partial any more.
		err := errPartGone
		if sameInode(dfd, base, fd) {
			err = errPartPlaced
		}
		unix.Close(fd)
		return -1, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, nil, errors.New("the partial file's name is taken by something else")
	}
	if st.Size == 0 && create {
		// New: an empty record, past a hole of the file's size that the
		// ranges fill as they arrive.
		if err := writeTrailer(fd, e, nil); err != nil {
			unix.Close(fd)
			return -1, nil, err
		}
		return fd, nil, nil
	}
	spans, err = readTrailer(fd, &st, e)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, spans, nil
}

// sameInode reports whether name in dfd is still the file fd.
func sameInode(dfd int, name string, fd int) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Fstatat(dfd, name, &b, unix.AT_SYMLINK_NOFOLLOW) == nil && a.Ino == b.Ino && a.Dev == b.Dev
}

// fileID is a file's identity on its filesystem.
type fileID struct{ dev, ino uint64 }

// complete reports whether base in dfd (dir under the root) is e's file
// complete: a regular file of e's size that this receiver completed from
// the partial part (whatever its mtime: a late copy of a range may be
// writing into it, see restorePlaced), or one of e's mtime as well, in
// the check modes where that makes a file up to date (not where every
// file goes again, nor where its content decides).
func (r *Receiver) complete(dfd int, dir, base, part string, e *model.Entry) bool {
	var st unix.Stat_t
	if unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != e.Size {
		return false
	}
	if id, ok := r.completed.Load(path.Join(dir, part)); ok && id.(fileID) == (fileID{uint64(st.Dev), st.Ino}) {
		return true
	}
	switch r.opt.check() {
	case wire.CheckNone, wire.CheckSum:
		return false
	}
	return st.Mtim.Nano() == e.MTime
}

// rememberPlaced records that this receiver completed the split file fd
// from the partial part in dir.
func (r *Receiver) rememberPlaced(dir, part string, fd int) {
	var st unix.Stat_t
	// Bounded: beyond it, a late range of a file placed earlier is told
	// apart by its size and mtime alone (or not at all in check mode
	// none, where it begins a partial that its own file's next
	// completion takes away).
	if unix.Fstat(fd, &st) == nil && r.completedN.Add(1) <= 1<<12 {
		r.completed.Store(path.Join(dir, part), fileID{uint64(st.Dev), st.Ino})
	}
}

// restorePlaced gives the file e its metadata again if fd, written into
// as e's partial, has become the file in place meanwhile (another copy of
// the range completed it while this one still wrote): the same bytes,
// written again, moved its mtime (and may have cleared its setuid bits).
// Every writer checks after its last write, and the completing one sets
// the mtime again after the rename (see commitRange): whichever order
// they come in, the file ends with the sender's metadata.
func (t *Txn) restorePlaced(dfd int, part, base string, fd int, e *model.Entry) error {
	if sameInode(dfd, part, fd) || !sameInode(dfd, base, fd) {
		return nil
	}
	return t.setMeta(fd, e, -1)
}

// rangeLanded reports whether range e is recorded in its partial: then
// Need does not ask for it again.
func (r *Receiver) rangeLanded(e *model.Entry) bool {
	if CheckName(e.Path, e.Kind) != nil || checkRange(e) != nil {
		return false
	}
	d, base := splitDir(e.Path)
	df, err := r.openDir(d, 0)
	if err != nil {
		return false
	}
	defer df.Close()
	name := partName(base, e)
	if r.complete(int(df.Fd()), path.Dir(e.Path), base, name, e) {
		return true // a late copy of a range of a file this receiver completed
	}
	fd, spans, err := openPart(int(df.Fd()), name, base, e, false)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	landed, _ := relate(spans, e)
	return landed
}

// openRangePart opens range e's partial, name in dfd (dir under the
// root), creating it if it is the first of its file, and returns it locked
// with its landed ranges; or placed, and no partial begun or kept, if e's
// file is complete under its final name, base. That is a late copy of the
// range: one given to a stream again after its first stream was cut,
// applied by either after the other completed the file, which a partial
// begun then would outlive.
func (t *Txn) openRangePart(dfd int, dir, name, base string, e *model.Entry) (fd int, spans []span, placed bool, err error) {
	for range 3 {
		if t.r.complete(dfd, dir, base, name, e) {
			return -1, nil, true, nil
		}
		start := time.Now()
		fd, spans, err = openPart(dfd, name, base, e, true)
		t.r.io.Since(start)
		switch {
		case err == errPartPlaced: // completed while this waited for its lock
			return -1, nil, true, nil
		case err == errPartGone: // discarded meanwhile: begin it again, unless withdrawn
			if _, gone := t.r.withdrawn.Load(path.Join(dir, name)); gone {
				return -1, nil, false, err
			}
			continue
		case err != nil:
			return -1, nil, false, err
		}
		// Complete now, the file was completed from another partial
		// before this one was begun (between the check above and the
		// open): this one is of no use.
		if t.r.complete(dfd, dir, base, name, e) {
			unix.Unlinkat(dfd, name, 0)
			unix.Close(fd)
			return -1, nil, true, nil
		}
		return fd, spans, false, nil
	}
	return -1, nil, false, errPartGone
}

// writeRange writes range i (e) from src into its partial, which it
// creates if it is the first: whole, or, with b, as the block delta x
// against DEST's file (rangeDelta). The range is recorded at Commit.
func (t *Txn) writeRange(i int, e *model.Entry, src io.Reader, x *FileData, b *deltaBase) error {
	want := e.Len
	if b != nil {
		defer b.drop()
		want = wire.DataSize(e.Len, x.Delta)
	}
	if x != nil && (b == nil || x.Extents != nil || len(x.Xattrs) > 0) {
		err := fmt.Errorf("refusing %q: a range of a split file with a sparse map or attributes, or a block delta without a block list", e.Path)
		t.fail(i, wire.CodeInvalid, err)
		return err
	}
	if err := checkRange(e); err != nil {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing %q: %v", e.Path, err))
		return t.drain(src, want)
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return t.drain(src, want)
	}
	dfd := int(d.Fd())
	name := partName(base, e)
	if _, gone := t.r.withdrawn.Load(path.Join(path.Dir(e.Path), name)); gone {
		t.fail(i, wire.CodeOther, fmt.Errorf("receive %s: another range of this version of the file was withdrawn (the source changed): not installed", e.Path))
		return t.drain(src, want)
	}
	fd, spans, placed, err := t.openRangePart(dfd, path.Dir(e.Path), name, base, e)
	if err != nil {
		t.failErr(i, "open the partial file of", e.Path, err)
		return t.drain(src, want)
	}
	if placed { // its file is complete: a late copy of the range
		t.Skip(i)
		return t.drain(src, want)
	}
	landed, overlap := relate(spans, e)
	flock(fd, unix.LOCK_UN)
	switch {
	case landed: // another stream's copy of it got there first
		unix.Close(fd)
		t.Skip(i)
		return t.drain(src, want)
	case overlap:
		unix.Close(fd)
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing %q: its range of %d bytes at offset %d overlaps bytes already received", e.Path, e.Len, e.Off))
		return t.drain(src, want)
	}
	start := time.Now()
	var n int64
	var rerr, werr error
	var h *xxh3.Hasher128
	var dsum wire.Sum
	if b != nil {
		n, dsum, rerr, werr = t.rangeDelta(fd, e, src, x.Delta, x.Zero, b)
		t.wrote(start, nil)
	} else {
		var in io.Reader
		var tr *waitReader
		in, tr, h = t.hashed(src)
		defer release(h)
		if _, werr = unix.Seek(fd, e.Off, io.SeekStart); werr == nil {
			if _, local := in.(fdSource); !local && e.Len >= preallocMin {
				n, rerr, werr = copyAllocated(fd, in, e.Off, e.Len, t.r.limit)
			} else {
				n, rerr, werr = copyTo(fd, in, e.Len, t.r.limit)
			}
		}
		t.wrote(start, tr)
	}
	if err := t.restorePlaced(dfd, name, base, fd, e); err != nil && werr == nil {
		werr = err
	}
	if werr == nil && rerr == nil && n == want && t.r.opt.Fsync {
		fs := time.Now()
		werr = fdatasync(fd)
		t.mu.Lock()
		t.fsyncNanos += int64(time.Since(fs))
		t.mu.Unlock()
	}
	switch {
	case werr != nil:
		unix.Close(fd)
		t.failErr(i, "write", e.Path, werr)
		return t.drain(src, want-n)
	case rerr != nil:
		unix.Close(fd)
		t.fail(i, wire.CodeOther, fmt.Errorf("receive %s: %w", e.Path, rerr))
		return rerr
	case n != want:
		unix.Close(fd)
		err := fmt.Errorf("receive %s: the source shrank while being read: got %d of %d bytes of the range at %d", e.Path, n, want, e.Off)
		t.fail(i, wire.CodeOther, err)
		return err
	}
	if b != nil {
		t.addPending(pendingFile{index: i, dir: d, fd: fd, base: base, part: name, sum: dsum, summed: true}, e.Len)
		return nil
	}
	t.addPending(pendingFile{index: i, dir: d, fd: fd, base: base, part: name, sum: sumOf(h), summed: h != nil}, e.Len)
	return nil
}

// commitRange records the written range p in its partial and, if it was
// the last one missing, puts the file in place. It closes p.fd and reports
// whether the file is now in place.
func (t *Txn) commitRange(p *pendingFile) (placed bool) {
	e := &t.entries[p.index]
	dfd := int(p.dir.Fd())
	defer unix.Close(p.fd)
	if err := flock(p.fd, unix.LOCK_EX); err != nil {
		t.failErr(p.index, "lock the partial file of", e.Path, err)
		return false
	}
	dir := path.Dir(e.Path)
	if !sameInode(dfd, p.part, p.fd) {
		switch {
		case sameInode(dfd, p.base, p.fd):
			// Completed meanwhile by another copy of this range (a
			// stream given it again while this one still wrote it):
			// the same bytes, written again, which moved the mtime.
			if err := t.setMeta(p.fd, e, -1); err != nil {
				t.failErr(p.index, "set the metadata of", e.Path, err)
			}
		case t.r.complete(dfd, dir, p.base, p.part, e):
			// Dropped as of no use, its file complete (see below).
		default:
			t.fail(p.index, wire.CodeOther, fmt.Errorf("receive %s: its partial file was discarded while the range at %d was written (the source changed?): not installed", e.Path, e.Off))
		}
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(p.fd, &st); err != nil {
		t.failErr(p.index, "stat the partial file of", e.Path, err)
		return false
	}
	spans, err := readTrailer(p.fd, &st, e)
	if err != nil {
		t.fail(p.index, wire.CodeOther, fmt.Errorf("receive %s: %v", e.Path, err))
		return false
	}
	landed, overlap := relate(spans, e)
	switch {
	case landed:
		return false
	case overlap:
		t.fail(p.index, wire.CodeInvalid, fmt.Errorf("refusing %q: its range of %d bytes at offset %d overlaps bytes already received", e.Path, e.Len, e.Off))
		return false
	case len(spans) >= MaxRanges:
		t.fail(p.index, wire.CodeInvalid, fmt.Errorf("refusing %q: more than %d ranges", e.Path, MaxRanges))
		return false
	case t.r.complete(dfd, dir, p.base, p.part, e):
		// A partial begun while its file, complete, had another mtime for
		// a moment (a late copy of a range writing into it) or where only
		// another receiver knew it complete: of no use, and nothing would
		// ever remove it.
		unix.Unlinkat(dfd, p.part, 0)
		return false
	}
	spans = append(spans, span{e.Off, e.Len})
	slices.SortFunc(spans, func(a, b span) int { return int(min(max(a.off-b.off, -1), 1)) })
	if !complete(spans, e.Size) {
		if err := writeTrailer(p.fd, e, spans); err != nil {
			t.failErr(p.index, "record a range of", e.Path, err)
			return false
		}
		if t.r.opt.Fsync {
			if err := fdatasync(p.fd); err != nil {
				t.failErr(p.index, "fsync", e.Path, err)
				return false
			}
		}
		return false
	}
	// The last range: the file is whole.
	fail := func(op string, err error) bool {
		// The data are all there, the record says so: the next attempt
		// finds every range landed. Only metadata or the rename failed.
		t.failErr(p.index, op, e.Path, err)
		return false
	}
	if err := unix.Ftruncate(p.fd, e.Size); err != nil {
		return fail("truncate", err)
	}
	if err := t.setMeta(p.fd, e, -1); err != nil {
		unix.Unlinkat(dfd, p.part, 0) // its record is gone: start over
		return fail("set metadata of", err)
	}
	if t.r.opt.Fsync {
		if err := unix.Fsync(p.fd); err != nil {
			unix.Unlinkat(dfd, p.part, 0)
			return fail("fsync", err)
		}
	}
	if err := t.replace(p.dir, p.part, p.base, e.Path); err != nil {
		unix.Unlinkat(dfd, p.part, 0)
		return fail("rename into place", err)
	}
	t.r.rememberPlaced(dir, p.part, p.fd)
	// A late copy of a range that wrote into the partial after its mtime
	// was set, and found it still the partial once done, left it moved:
	// set again (one that finds it in place sets it itself).
	if err := unix.Fstat(p.fd, &st); err == nil && st.Mtim.Nano() != e.MTime {
		if err := dirat.SetMtime(p.fd, e.MTime); err != nil {
			t.failErr(p.index, "set the mtime of", e.Path, err)
		}
	}
	return true
}

// discardRange drops the partial of p's file: its sender withdrew a range
// (the source changed), so no range of this version may land.
func (t *Txn) discardRange(p *pendingFile) {
	e := &t.entries[p.index]
	// Bounded: beyond it, a later range of the old version may begin a
	// partial again, which its own withdrawal removes.
	if t.r.withdrawnN.Add(1) <= 1<<12 {
		t.r.withdrawn.Store(path.Join(path.Dir(e.Path), p.part), struct{}{})
	}
	dfd := int(p.dir.Fd())
	if flock(p.fd, unix.LOCK_EX) == nil && sameInode(dfd, p.part, p.fd) {
		unix.Unlinkat(dfd, p.part, 0)
	}
	unix.Close(p.fd)
}

func containsKey(m map[int]string, k int) bool { _, ok := m[k]; return ok }
