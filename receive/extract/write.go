package extract

// Writing a regular file: Write and WriteThen create it (under its own
// name in a directory this receiver made, else unnamed, staged aside or
// under a temporary name), copy exactly the entry's size into it (copyTo:
// copy_file_range, splice or a pooled buffer), hash the data as they
// arrive for the commit to check, apply the metadata through the
// descriptor, and leave the file pending for Commit, or place it at once
// (settle).

import (
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Write installs entry i (a regular file) from src, which must yield
// exactly the entry's size. The file lands under a temporary name (or,
// new in a directory this receiver made, under its own: see
// createInPlace); Commit gives it its name. An error is recorded against
// the entry and also returned; the returned error is non-nil only if src
// could not be fully consumed (the caller's stream is then out of step).
func (t *Txn) Write(i int, src io.Reader) error { return t.WriteThen(i, src, nil) }

// WriteThen is Write, after which, once the file is written in full,
// placeNow (if not nil) may say to give it its name at once rather than at
// Commit: for a sender that has nothing to say at Commit (no content
// hashes), and knows at once whether the file is to be kept. On a slow
// filesystem the links into place then go on while the batch's other
// files are written, rather than all after them; Commit counts the file.
func (t *Txn) WriteThen(i int, src io.Reader, placeNow func() bool) error {
	e := &t.entries[i]
	src, x := fileData(src) // a sparse map, extended attributes
	want := x.dataSize(e.Size)
	if err := t.checkName(i); err != nil {
		return err
	}
	if e.Kind != model.KindFile {
		err := fmt.Errorf("entry %q is a %s, not a file", e.Path, e.Kind)
		t.fail(i, wire.CodeInvalid, err)
		return err
	}
	if e.IsRange() {
		var b *deltaBase
		if x != nil && x.Delta != nil {
			b = t.deltas.take(i)
		}
		return t.writeRange(i, e, src, x, b)
	}
	if x != nil && x.Delta != nil {
		if b := t.deltas.take(i); b != nil {
			return t.writeDelta(i, e, src, x, b)
		}
		err := fmt.Errorf("receive %s: a block delta, but no temporary was made for it", e.Path)
		t.fail(i, wire.CodeInvalid, err)
		return t.drain(src, want)
	}
	td, base := t.txnDir(e.Path)
	d, err := td.f, td.err
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return t.drain(src, want)
	}
	if t.queues(src, x, e) {
		return t.enqueue(i, e, td, base, src.(*tarReader))
	}
	dfd := int(d.Fd())
	tmp, fd := "", -1
	// The calls on this file: quick only for one created under its name
	// in a directory of the receiver's memory filesystem.
	sys := dirat.Calls{}
	created := time.Now()
	if f := t.r.createInPlace(td.sys, dfd, e.Path, base, uint32(e.Mode.Perm()), t.spread); f >= 0 {
		fd, tmp, sys = f, base, td.sys // written under its final name
		t.r.setWriting(e.Path, true)
	}
	if fd < 0 && t.r.linking() != linkNone && tmpfilesOpen.Load() < maxTmpfiles {
		if f, err := dirat.Open(dfd, ".", oTmpfile|unix.O_WRONLY|unix.O_CLOEXEC, uint32(e.Mode.Perm())); err == nil {
			fd = f
			tmpfilesOpen.Add(1)
		}
	}
	tdir := dfd // where the temporary file is: d, or a staging directory
	if fd < 0 {
		if sd := t.r.stageFor(path.Dir(e.Path), d); sd != nil {
			tdir = int(sd.Fd())
		}
		tmp = t.tmpName()
		fd, err = unix.Openat(tdir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(e.Mode.Perm()))
		if err == unix.ENOENT && tdir != dfd {
			// The staging directory is gone (removed by hand, or by a
			// run that took it for an interrupted one's): in place.
			tdir = dfd
			fd, err = unix.Openat(tdir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(e.Mode.Perm()))
		}
		if err != nil {
			t.failErr(i, "create", e.Path, err)
			return t.drain(src, want)
		}
	}
	// Write time is the receiver's own work: not the time spent waiting
	// for the data to arrive. It starts where the create ends.
	start := time.Now()
	t.r.io.Observe(start.Sub(created))
	nf := newFile{i: i, d: d, dfd: dfd, tdir: tdir, tmp: tmp, base: base, fd: fd, sys: sys}
	var (
		n          int64
		rerr, werr error
		h          *xxh3.Hasher128
	)
	if b := bufferedBody(src, x, e); b != nil {
		n, h, werr = t.writeBuffered(sys, fd, b, src.(*tarReader))
		t.wrote(start, nil) // (nothing waited for)
	} else {
		var in io.Reader
		var tr *waitReader
		in, tr, h = t.hashed(src)
		n, rerr, werr = t.copyData(fd, in, x, e, h)
		t.wrote(start, tr)
	}
	defer release(h)
	switch {
	case werr != nil:
		t.discard(&nf)
		t.failErr(i, "write", e.Path, werr)
		return t.drain(src, want-n)
	case rerr != nil:
		t.discard(&nf)
		t.fail(i, wire.CodeOther, fmt.Errorf("receive %s: %w", e.Path, rerr))
		return rerr
	case n != want:
		t.discard(&nf)
		err := fmt.Errorf("receive %s: the source shrank while being read: got %d of %d bytes", e.Path, n, want)
		t.fail(i, wire.CodeOther, err)
		return err
	}
	t.finish(&nf, sumOf(h), h != nil, x.xattrs(), placeNow)
	return nil
}

// newFile is a file being written: entry i, in directory d (dfd), as tmp
// in tdir (d's, or a staging directory's), open as fd; tmp is base when
// the file is written under its final name, "" when it is unnamed.
type newFile struct {
	i         int
	d         *os.File
	dfd, tdir int
	tmp, base string
	fd        int
	sys       dirat.Calls
}

// discard abandons f, written in part or in full: closed and removed.
func (t *Txn) discard(f *newFile) {
	var st unix.Stat_t
	if f.tmp == f.base && unix.Fstat(f.fd, &st) == nil {
		unix.Close(f.fd) // written under its name: see unlinkIno
		unlinkIno(f.tdir, f.base, st.Ino)
		t.r.setWriting(t.entries[f.i].Path, false)
		return
	}
	t.dropFile(f.tdir, f.tmp, f.fd)
}

// finish gives f, its data written in full (whose hash is sum, if summed),
// its metadata (xs its extended attributes), syncs it with Fsync, and
// leaves it pending for Commit (or places it: settle). A failure is
// recorded against the entry, the file discarded.
func (t *Txn) finish(f *newFile, sum wire.Sum, summed bool, xs []wire.Xattr, placeNow func() bool) {
	i, e, fd, tmp, base := f.i, &t.entries[f.i], f.fd, f.tmp, f.base
	// A file under its final name gets its mtime once its batch commits
	// (place), if its descriptor is held till then: until that moment
	// no quick check, of this receiver or another on the same DEST, takes
	// it for up to date (see Receiver.writing, and unlinkIno).
	if err := t.setMetaWith(f.sys, fd, e, int64(createMode(e.Mode)), tmp != base); err != nil {
		t.discard(f)
		t.failErr(i, "set metadata of", e.Path, err)
		return
	}
	if err := t.setXattrs(fd, -1, "", e, xs); err != nil {
		t.discard(f)
		t.fail(i, Code(err), err)
		return
	}
	if t.r.opt.Fsync {
		start := time.Now()
		err := unix.Fsync(fd)
		t.mu.Lock()
		t.fsyncNanos += int64(time.Since(start))
		t.mu.Unlock()
		if err != nil {
			t.discard(f)
			t.failErr(i, "fsync", e.Path, err)
			return
		}
	}
	if tmp == "" {
		// An unnamed file keeps its descriptor until Commit links it.
		t.settle(pendingFile{index: i, dir: f.d, fd: fd, base: base, sum: sum, summed: summed}, e.Size, placeNow)
		return
	}
	pf := pendingFile{index: i, dir: f.d, tmp: tmp, fd: -1, base: base, sum: sum, summed: summed, held: -1}
	if f.tdir != f.dfd {
		pf.sdir, pf.held = f.tdir, t.r.staging.hold(fd)
	}
	if pf.direct() {
		if holdDirect(t.r) {
			// Its descriptor is kept until the batch settles: a drop asks
			// it for the inode then, and a commit closes it, one fstat a
			// file fewer than asking now.
			pf.fd, pf.sys = fd, f.sys
			t.settle(pf, e.Size, placeNow)
			return
		}
		if err := f.sys.SetMtime(fd, e.MTime); err != nil {
			t.discard(f)
			t.failErr(i, "set metadata of", e.Path, err)
			return
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			pf.ino = st.Ino
		}
	}
	if err := unix.Close(fd); err != nil {
		unhold(pf.held)
		unix.Unlinkat(f.tdir, tmp, 0)
		t.failErr(i, "close", e.Path, err)
		return
	}
	t.settle(pf, e.Size, placeNow)
}

// createInPlace creates the new file p (base in directory dfd) under its
// final name, as tar -x does, rather than as a temporary to be linked into
// place, and returns its descriptor; or -1: the usual way.
//
// Only in a directory this receiver made (empty then, so nothing of the
// user's, or of an earlier run, is there). The temporary's link into place
// is a large share of the receiver's CPU where files are small. Until its
// batch is committed such a file may be seen half-written, but only in a
// directory that did not exist before this job; one that fails (its source
// changed, its data does not hash to the sender's, the batch is aborted)
// is removed, and one left by a receiver killed outright has neither its
// size nor its mtime yet, so the next run sends it again (the journal, the
// batch). A name taken meanwhile (O_EXCL) goes the usual way, which
// replaces what took it. Not with --fsync: a file under its name with its
// size and mtime set, whose data a power cut lost before the fsync, would
// pass the next run's quick check; a temporary gets its name only after
// its fsync.
//
// On a slow filesystem (NFS, FUSE: several operations at once) only while
// no other file is being created in that directory: a create holds the
// directory's lock for a round trip or two, and the files of one directory
// then go one at a time, slower than staged aside (see stage.go, whose
// link into place holds the lock for a lookup only); the others are
// staged. Spread over many directories, written in place is the faster,
// and the filesystem serves fewer operations a file.
//
// Unless the batch is spread (Txn.spread: its files come from many
// directories in turn, as the sender cuts them for a slow receiver): then
// each directory has only a few of the files in flight at once, a staged
// file's link would wait on the same lock as a create, and every file is
// created in place, the fastest of the three ways.
func (r *Receiver) createInPlace(sys dirat.Calls, dfd int, p, base string, perm uint32, spread bool) int {
	dir := path.Dir(p)
	if r.opt.Fsync || !r.made(dir) {
		return -1
	}
	if landSlow(r) && !spread {
		r.mu.Lock()
		busy := r.creating[dir]
		if !busy {
			if r.creating == nil {
				r.creating = map[string]bool{}
			}
			r.creating[dir] = true
		}
		r.mu.Unlock()
		if busy {
			return -1
		}
		defer func() {
			r.mu.Lock()
			delete(r.creating, dir)
			r.mu.Unlock()
		}()
	}
	fd, err := sys.Open(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return -1
	}
	return fd
}

// settle hands p, of size bytes, to the batch if placeNow (see WriteThen)
// is nil or says no; else to a goroutine that places it, at most
// placeWidth at once in one target directory: there the kernel takes the
// links one at a time, under the directory's lock, and a writer waiting
// for it would hold up the batch's other files.
func (t *Txn) settle(p pendingFile, size int64, placeNow func() bool) {
	if placeNow == nil || !placeNow() {
		t.addPending(p, size)
		return
	}
	t.mu.Lock()
	if t.placers == nil {
		t.placers = map[*os.File]chan struct{}{}
	}
	sem := t.placers[p.dir]
	if sem == nil {
		sem = make(chan struct{}, placeWidth)
		t.placers[p.dir] = sem
	}
	t.mu.Unlock()
	q := p // (only here does the file go to the heap, with the goroutine)
	t.placing.Go(func() {
		sem <- struct{}{}
		t.place(&q, nil)
		<-sem
		t.addPending(q, size)
	})
}

// placeWidth is how many files WriteThen places at once in one directory:
// one link under its lock while others unlink their staged names.
const placeWidth = 4

func (t *Txn) addPending(p pendingFile, size int64) {
	p.size = size
	t.mu.Lock()
	if t.pending == nil {
		// Sized once for the batch: grown by append, a batch of small
		// files copies its pending files over again at every doubling.
		t.pending = make([]pendingFile, 0, t.regularFiles())
	}
	t.pending = append(t.pending, p)
	t.mu.Unlock()
}

// regularFiles counts the batch's regular files (ranges too): at most that
// many files are pending at once.
func (t *Txn) regularFiles() int {
	n := 0
	for i := range t.entries {
		if t.entries[i].Kind == model.KindFile {
			n++
		}
	}
	return n
}

// hasherPool holds the hashers of files being written (several at once),
// waitPool their readers.
var (
	hasherPool = sync.Pool{New: func() any { return xxh3.New128() }}
	waitPool   = sync.Pool{New: func() any { return new(waitReader) }}
)

// bufferedBody is entry e's whole body when it lies already read in the
// buffer of the stream below src (tarReader.buffered, a small file's as a
// rule): written from there, it is neither copied into a buffer of its own
// nor timed for a wait that cannot happen.
func bufferedBody(src io.Reader, x *FileData, e *model.Entry) []byte {
	tr, ok := src.(*tarReader)
	if !ok || !x.dense() || e.Size <= 0 {
		return nil
	}
	return tr.buffered(e.Size)
}

// writeBuffered writes the body b of src's current entry into fd, hashes
// it (unless the sender sends no hashes), and consumes it from src. It
// returns the bytes taken from src (all of b, even after a write error),
// the hash (release it) and the write error.
func (t *Txn) writeBuffered(sys dirat.Calls, fd int, b []byte, src *tarReader) (int64, *xxh3.Hasher128, error) {
	var h *xxh3.Hasher128
	if !t.r.opt.NoSums {
		h = hasherPool.Get().(*xxh3.Hasher128)
		h.Reset()
		h.Write(b)
	}
	t.r.limit.Wait(len(b))
	err := writeAllWith(sys, fd, b)
	src.take(len(b))
	return int64(len(b)), h, err
}

// hashed wraps src for writing: data from a stream is hashed as it is
// written, for the sender's hash in the commit to check (end-to-end
// integrity), and the time spent waiting for it is counted in tr. A local
// file (copy_file_range reads and writes in one call) is neither: tr and
// h are nil; nor is a body that can be spliced when the sender sends no
// hashes (Options.NoSums). release(h) once done.
func (t *Txn) hashed(src io.Reader) (in io.Reader, tr *waitReader, h *xxh3.Hasher128) {
	if _, ok := src.(fdSource); ok {
		return src, nil, nil
	}
	if t.r.opt.NoSums && canSplice(src) {
		return src, nil, nil
	}
	h = hasherPool.Get().(*xxh3.Hasher128)
	h.Reset()
	// Hashed as it is read, in the same pass that writes it.
	tr = waitPool.Get().(*waitReader)
	*tr = waitReader{r: src, h: h}
	return tr, tr, h
}

func release(h *xxh3.Hasher128) {
	if h != nil {
		hasherPool.Put(h)
	}
}

func sumOf(h *xxh3.Hasher128) wire.Sum {
	if h == nil {
		return wire.Sum{}
	}
	return h.Sum128().Bytes()
}

// wrote counts the time since start, less what tr waited for data, as
// the batch's write time: the receiver's own work. tr is done with then.
func (t *Txn) wrote(start time.Time, tr *waitReader) {
	spent := int64(time.Since(start))
	if tr != nil {
		spent -= tr.nanos
		*tr = waitReader{}
		waitPool.Put(tr)
	}
	t.mu.Lock()
	t.writeNanos += spent
	t.mu.Unlock()
}

// waitReader accounts the time spent waiting for data, and hashes the
// data into h (as io.TeeReader would; a hash takes every write).
type waitReader struct {
	r     io.Reader
	nanos int64
	h     *xxh3.Hasher128
}

func (w *waitReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := w.r.Read(p)
	w.nanos += int64(time.Since(start))
	if n > 0 {
		w.h.Write(p[:n])
	}
	return n, err
}

// copyRangeMin is the smallest file copied with copy_file_range. Below it
// a read and a write are cheaper: on tmpfs and ext4, copy_file_range of a
// small file goes through the kernel's splice machinery, which costs more
// system time than it saves.
var copyRangeMin int64 = 256 << 10

// fdSource is a source that can hand its descriptor to copy_file_range.
type fdSource interface{ Fd() uintptr }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyTo copies exactly n bytes from src into fd, with copy_file_range
// when src is a file, by splice from a socket (Splicer), else through a
// pooled buffer. It tells read errors (rerr: the source or the stream)
// from write errors (werr: the destination), and returns the bytes taken
// from src: all written, unless werr (the caller then skips the rest of
// the body, which must start after what was taken).
func copyTo(fd int, src io.Reader, n int64, lim *ratelimit.Bucket) (written int64, rerr, werr error) {
	if sp, ok := src.(Splicer); ok && lim.Rate() <= 0 && n >= spliceMin && canSplice(src) {
		return sp.SpliceTo(fd, n)
	}
	if fs, ok := src.(fdSource); ok && n >= copyRangeMin {
		sfd := int(fs.Fd())
		for written < n {
			m, err := copyFileRange(sfd, fd, int(min(n-written, 1<<30)))
			if err == unix.EINTR {
				continue
			}
			if err == unix.EXDEV || err == unix.ENOSYS || err == unix.EINVAL || err == unix.EOPNOTSUPP {
				break // fall back to read and write
			}
			if err != nil {
				// copy_file_range does not say which side failed.
				if Code(err) != wire.CodeOther || err == unix.EIO || err == unix.EFBIG {
					return written, nil, err
				}
				return written, err, nil
			}
			if m == 0 {
				return written, nil, nil // the source is shorter than n
			}
			lim.Wait(m)
			written += int64(m)
		}
		if written == n {
			return written, nil, nil
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for written < n {
		m, err := src.Read(buf[:min(int64(len(buf)), n-written)])
		if m > 0 {
			lim.Wait(m)
			written += int64(m)
			if werr := writeAll(fd, buf[:m]); werr != nil {
				return written, nil, werr
			}
		}
		if err == io.EOF {
			return written, nil, nil
		}
		if err != nil {
			return written, err, nil
		}
	}
	return written, nil, nil
}

func writeAll(fd int, b []byte) error { return writeAllWith(dirat.Calls{}, fd, b) }

func writeAllWith(sys dirat.Calls, fd int, b []byte) error {
	for len(b) > 0 {
		m, err := sys.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

// drain consumes the rest of an entry's data so the stream stays in step.
func (t *Txn) drain(src io.Reader, n int64) error {
	if n <= 0 {
		return nil
	}
	m, err := io.CopyN(io.Discard, src, n)
	if err == nil && m != n {
		err = io.ErrUnexpectedEOF
	}
	return err
}
