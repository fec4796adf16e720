package source

import (
	"errors"
	"fmt"
	"github.com/bulkmove/bulkmove/internal/idmap"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// ErrChanged marks a source file that changed between the walk and the
// send, or while being read. It is reported, never installed.
var ErrChanged = errors.New("file changed")

// Source opens the files of a batch under a source root.
type Source struct {
	Root string // the directory entry paths are relative to
	File string // if set, the one file every entry reads (a single-file SRC)
	// Limit, if set, paces reading the source (shared by all streams):
	// gentle on a production disk, and how tests make the source the
	// bottleneck.
	Limit *ratelimit.Bucket
	// IO measures the source's latency per file and says how many files to
	// open and read at once (ahead of the stream, see readAhead); nil: one.
	IO *ioconc.Gauge
	// Xattrs, ACLs and Sparse send extended attributes (-X), ACLs (-A)
	// and sparse files as their data extents (--sparse): see extras.go.
	Xattrs, ACLs, Sparse bool
	// Owners, if set, is the sending side's name service: the manifests
	// then carry its names of their entries' owners (OwnerNames).
	Owners *idmap.Names
	// FollowLinks opens a file's name through a symlink: the walk followed
	// it (-L, --copy-unsafe-links) and the entry is what it points to.
	// Recheck still says whether that is the file the walk saw.
	FollowLinks bool
	// FakeSuper: SRC is read as --fake-super wrote it (sharder.Options
	// FakeSuper); rsync's own attributes there (user.rsync.%stat) are
	// what the entries say, not attributes to copy.
	FakeSuper bool

	// openHook, if set, is called with each file's path before it is
	// opened: how tests hold an open back (WithOpenHook).
	openHook func(path string)
}

// WithOpenHook returns s calling hook with each file's path before it is
// opened: how tests (here and in the packages that drive a Source) hold
// an open back.
func (s Source) WithOpenHook(hook func(path string)) Source {
	s.openHook = hook
	return s
}

// File is an open source file: a bare descriptor, read with read(2) or
// handed to copy_file_range, without the runtime poller's bookkeeping.
type File struct {
	fd         int
	root, path string // its name is root/path, joined only for messages
	sys        dirat.Calls

	// A file read ahead (see readAhead): its content, the read error
	// after it, and Recheck's verdict, made right after the read.
	ahead    *[]byte
	inMem    bool // read whole by the ring (see ringAhead): pre, no descriptor
	pre      []byte
	preErr   error
	checked  bool
	checkErr error
}

// Read implements io.Reader.
func (f *File) Read(p []byte) (int, error) {
	if f.ahead != nil || f.inMem {
		if len(f.pre) == 0 {
			if f.preErr != nil {
				return 0, f.preErr
			}
			return 0, io.EOF
		}
		n := copy(p, f.pre)
		f.pre = f.pre[n:]
		return n, nil
	}
	for {
		n, err := f.sys.Read(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: f.Name(), Err: err}
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// SeekTo moves f to off, where a range of a split file starts.
func (f *File) SeekTo(off int64) error {
	if _, err := unix.Seek(f.fd, off, io.SeekStart); err != nil {
		return &os.PathError{Op: "seek", Path: f.Name(), Err: err}
	}
	return nil
}

// Fd returns the descriptor.
func (f *File) Fd() uintptr { return uintptr(f.fd) }

// Name is the file's path.
func (f *File) Name() string {
	if f.root == "" {
		return f.path
	}
	return filepath.Join(f.root, filepath.FromSlash(f.path))
}

// Close closes the descriptor.
func (f *File) Close() error {
	if f.ahead != nil {
		aheadPut(f.ahead)
		f.ahead, f.pre = nil, nil
	}
	if f.inMem {
		f.pre = nil
		return nil
	}
	return f.sys.Close(f.fd)
}

// Dirs keeps the directory a batch is reading from open, so that each file
// is opened relative to it: one name for the kernel to resolve instead of
// the whole path (a batch keeps a directory's files together). Not safe for
// concurrent use: one per stream.
type Dirs struct {
	dir string
	fd  int
	mem memDevs
	// shared, if set, holds the directories instead, for several readers
	// at once (see SharedDirs).
	shared *dirCache
}

// SharedDirs returns a Dirs that several goroutines may use at once: each
// directory is opened once, whoever needs it first, and kept open while
// any of them reads from it (and a few more after). Close it once all are
// done.
func SharedDirs() *Dirs { return &Dirs{shared: &dirCache{m: map[string]*dirRef{}}} }

// Close releases the open directories.
func (d *Dirs) Close() {
	if d.shared != nil {
		d.shared.close()
		return
	}
	if d.fd > 0 {
		unix.Close(d.fd)
	}
	d.fd, d.dir = 0, ""
}

// dirCache is the directories of a SharedDirs.
type dirCache struct {
	mu  sync.Mutex
	m   map[string]*dirRef
	mem memDevs
}

type dirRef struct {
	once sync.Once
	fd   int // -1 if it could not be opened
	refs int
}

// memDevs remembers which of the source's devices are memory filesystems,
// whose files are read with dirat's quick calls (see dirat.Calls): asked
// once per device, of the first directory seen on it, not once per
// directory opened.
type memDevs struct {
	mu sync.Mutex
	m  map[uint64]bool
}

// calls returns the Calls for e, a file in the open directory dirfd, by
// the device the walk saw it on.
func (c *memDevs) calls(dirfd int, e *model.Entry) dirat.Calls {
	if e.Dev == 0 {
		return dirat.Calls{} // not walked: unknown
	}
	c.mu.Lock()
	on, ok := c.m[e.Dev]
	c.mu.Unlock()
	if !ok {
		var dev uint64
		if on, dev = dirat.OnMemory(dirfd); dev != e.Dev {
			return dirat.Calls{} // (a mount point of another filesystem)
		}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[uint64]bool{}
		}
		c.m[e.Dev] = on
		c.mu.Unlock()
	}
	return dirat.Quick(on)
}

// idleDirs is how many directories no reader uses a SharedDirs keeps open.
const idleDirs = 16

func (c *dirCache) get(root, dir string) *dirRef {
	c.mu.Lock()
	r := c.m[dir]
	if r == nil {
		r = &dirRef{}
		c.m[dir] = r
	}
	r.refs++
	c.mu.Unlock()
	r.once.Do(func() {
		r.fd = -1
		if fd, err := unix.Open(filepath.Join(root, filepath.FromSlash(dir)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			r.fd = fd
		}
	})
	return r
}

func (c *dirCache) put(dir string, r *dirRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.refs--; r.refs == 0 && len(c.m) > idleDirs {
		delete(c.m, dir)
		if r.fd >= 0 {
			unix.Close(r.fd)
		}
	}
}

func (c *dirCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir, r := range c.m {
		r.once.Do(func() { r.fd = -1 })
		if r.fd >= 0 {
			unix.Close(r.fd)
		}
		delete(c.m, dir)
	}
}

// openFlags open a source file. O_NONBLOCK, as GNU tar does: a file the
// walk saw regular that is a FIFO by the time it is opened would
// otherwise hold its stream until a writer came, for ever if none does;
// so opened, it reads as empty and Recheck reports it changed. On a
// regular file O_NONBLOCK changes nothing but the wait for another's
// lease (a Samba oplock), for which OpenIn opens again without it.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | oNoatime | unix.O_NONBLOCK

// Open opens entry e for reading. Whether it is still the file the walk
// saw is for Recheck to say, after the data is read.
func (s Source) Open(e *model.Entry) (*File, error) { return s.OpenIn(nil, e) }

// OpenIn opens entry e relative to the directory cached in d (nil: none).
func (s Source) OpenIn(d *Dirs, e *model.Entry) (*File, error) {
	f := new(File)
	if err := s.openInto(f, d, e, true); err != nil {
		return nil, err
	}
	return f, nil
}

// openInto is OpenIn into f, which a writer reuses from file to file;
// timed says whether to tell s.IO how long the open took.
func (s Source) openInto(f *File, d *Dirs, e *model.Entry, timed bool) error {
	*f = File{root: s.Root, path: e.Path}
	dirfd, name := unix.AT_FDCWD, ""
	switch {
	case s.File != "":
		f.root, f.path, name = "", s.File, s.File
	case d != nil && d.shared != nil:
		dir, base := path.Split(e.Path)
		r := d.shared.get(s.Root, dir)
		defer d.shared.put(dir, r)
		if r.fd >= 0 {
			dirfd, name = r.fd, base
			f.sys = d.shared.mem.calls(r.fd, e)
		} else {
			name = f.Name()
		}
	case d != nil:
		dir, base := path.Split(e.Path)
		if d.fd <= 0 || d.dir != dir {
			d.Close()
			if fd, err := unix.Open(filepath.Join(s.Root, filepath.FromSlash(dir)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
				d.fd, d.dir = fd, dir
			}
		}
		if d.fd > 0 {
			dirfd, name = d.fd, base
			f.sys = d.mem.calls(d.fd, e)
		} else {
			name = f.Name()
		}
	default:
		name = f.Name()
	}
	if s.openHook != nil {
		s.openHook(e.Path)
	}
	var start time.Time
	if timed {
		start = time.Now()
	}
	flags := openFlags
	if s.FollowLinks {
		flags &^= unix.O_NOFOLLOW
	}
	fd, err := f.sys.Open(dirfd, name, flags, 0)
	if timed {
		s.IO.Since(start)
	}
	if err == unix.EPERM { // O_NOATIME needs ownership
		flags &^= oNoatime
		fd, err = dirat.Open(dirfd, name, flags, 0)
	}
	if err == unix.EAGAIN { // another's lease: wait for its break
		fd, err = dirat.Open(dirfd, name, flags&^unix.O_NONBLOCK, 0)
	}
	if err != nil {
		if err == unix.ENOENT {
			return fmt.Errorf("read %s: %w: vanished since the walk", f.Name(), ErrChanged)
		}
		if err == unix.ELOOP {
			return fmt.Errorf("read %s: %w: now a symlink", f.Name(), ErrChanged)
		}
		return fmt.Errorf("read %s: %w", f.Name(), err)
	}
	// No fstat here: Recheck after the copy catches a file that changed
	// since the walk as surely, and a changed file is rare.
	f.fd = fd
	return nil
}

// Recheck reports whether f changed while being read.
func (s Source) Recheck(f *File, e *model.Entry) error {
	if f.checked {
		return f.checkErr
	}
	return s.same(f, e, "while being read")
}

func (s Source) same(f *File, e *model.Entry, when string) error {
	var st unix.Stat_t
	if err := f.sys.Fstat(f.fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return notRegularErr(f)
	}
	if st.Size != e.Size || st.Mtim.Nano() != e.MTime {
		return fmt.Errorf("read %s: %w %s (size %d, was %d; mtime %s, was %s)", f.Name(), ErrChanged, when,
			st.Size, e.Size, time.Unix(0, st.Mtim.Nano()).Format(time.RFC3339Nano), e.ModTime().Format(time.RFC3339Nano))
	}
	return nil
}

// notRegular reports, as an ErrChanged, that f is no longer a regular
// file (a FIFO took its name since the walk), or nil.
func (f *File) notRegular() error {
	var st unix.Stat_t
	if f.sys.Fstat(f.fd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return notRegularErr(f)
	}
	return nil
}

func notRegularErr(f *File) error {
	return fmt.Errorf("read %s: %w: no longer a regular file", f.Name(), ErrChanged)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// zeros pads a file that shrank mid-read, to keep the tar stream in step.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// Error is a file the sender could not send, with why.
type Error struct {
	Index int
	Err   error
}

// FileSender is a writer that can also take a body straight from a
// file's descriptor, as sendfile(2) does: WriteTar hands it the bodies
// that need no hashing, no sparse map and no pacing.
type FileSender interface {
	io.Writer
	// SendFile sends n bytes of the file fd from its offset. A short
	// count with no error: the file ended early. rerr is a failure
	// reading the file (ErrNoSendfile: nothing was sent, the body goes by
	// read and write instead), werr one of the writer.
	SendFile(fd int, n int64) (sent int64, rerr, werr error)
	// SendFileMin is the smallest body worth sending so (each costs the
	// writer a flush and a call of its own).
	SendFileMin() int64
}

// ErrNoSendfile: the file cannot be sent by sendfile (a filesystem without
// the kernel's splice support, as FUSE with direct I/O), and nothing was
// sent: its body goes by read and write instead.
var ErrNoSendfile = errors.New("sendfile not supported")

// WriteTar writes the needed files of batch b as a tar stream to w and
// returns the entries to discard (changed while read) and the entries that
// could not be sent at all. A non-nil error means w failed: the stream is
// broken.
func (s Source) WriteTar(w io.Writer, b *wire.BatchManifest, need []bool, ctr *metrics.Stream) (discards []wire.Discard, failed []Error, err error) {
	discards, failed, _, err = s.writeTar(w, b, need, ctr, false)
	return discards, failed, err
}

// WriteTarSums is WriteTar, also returning the XXH3-128 of each file sent
// whole, as it was read (for the receiver to check: end-to-end integrity).
func (s Source) WriteTarSums(w io.Writer, b *wire.BatchManifest, need []bool, ctr *metrics.Stream) (discards []wire.Discard, failed []Error, sums []wire.IndexedSum, err error) {
	return s.writeTar(w, b, need, ctr, true)
}

// Written is what WriteBatch says of a batch it wrote.
type Written struct {
	Discards []wire.Discard    // changed while read: the receiver drops them
	Failed   []Error           // not sent, or discarded, and why
	Sums     []wire.IndexedSum // with hashes: each file's end-to-end sum
	Deltas   []Delta           // the files sent as a block delta
}

// WriteBatch is WriteTar, with hash WriteTarSums, given the receiver's
// block lists by entry (nil: none): those files go as a block delta
// (delta.go), a sparse one's holes as blocks of zeros.
func (s Source) WriteBatch(w io.Writer, b *wire.BatchManifest, need []bool, blocks map[int]*wire.BlockList, ctr *metrics.Stream, hash bool) (Written, error) {
	var res Written
	var err error
	res.Discards, res.Failed, res.Sums, err = s.writeTarBlocks(w, b, need, blocks, &res.Deltas, ctr, hash)
	return res, err
}

func (s Source) writeTar(w io.Writer, b *wire.BatchManifest, need []bool, ctr *metrics.Stream, hash bool) (discards []wire.Discard, failed []Error, sums []wire.IndexedSum, err error) {
	return s.writeTarBlocks(w, b, need, nil, nil, ctr, hash)
}

func (s Source) writeTarBlocks(w io.Writer, b *wire.BatchManifest, need []bool, blocks map[int]*wire.BlockList, deltas *[]Delta, ctr *metrics.Stream, hash bool) (discards []wire.Discard, failed []Error, sums []wire.IndexedSum, err error) {
	h := xxh3.New128()
	var dbuf []byte // a delta's block
	ts := newTarStream(w)
	if err := ts.global(map[string]string{wire.PAXBatch: strconv.FormatUint(b.ID, 10)}); err != nil {
		return nil, nil, nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var dirs Dirs
	defer dirs.Close()
	ra := s.startReadAhead(b.Entries, need, ctr)
	defer ra.close()
	var ring *ringAhead
	if ra == nil {
		ring = s.startRing(b.Entries, need, ctr)
		defer ring.close()
	}
	// What each file passes through, the batch's and reused file after
	// file: a small file costs no allocation of its own.
	var (
		fbuf File
		src  readTracker
		lim  io.LimitedReader
		tee  hashTee
		samp ioconc.Sampler // which small files' open and reads are timed
	)
	src.ctr = ctr
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Kind != model.KindFile || !need[i] {
			continue
		}
		f, oerr := ra.open(i)
		// A large file's reads are always timed; a small file's, like its
		// open, once for several files (see ioconc.Sampler).
		src.scale = 1
		if e.DataLen() <= sampledMax {
			src.scale = samp.Next(s.IO)
		}
		if ra == nil {
			if f = ring.take(i); f == nil {
				f, oerr = &fbuf, s.openInto(&fbuf, &dirs, e, src.scale > 0)
			}
		}
		if oerr != nil {
			failed = append(failed, Error{i, oerr})
			continue
		}
		var ext []wire.Extent
		var xs []wire.Xattr
		var xerr error
		if !e.IsRange() { // a split file's ranges go bare (see sharder.Options.SplitSize)
			ext, xs, xerr = s.Extras(f, e) // a sparse map, extended attributes
		} else if serr := f.SeekTo(e.Off); serr != nil {
			f.Close()
			failed = append(failed, Error{i, serr})
			continue
		}
		if xerr != nil {
			failed = append(failed, Error{i, xerr})
		}
		if bl := blocks[i]; bl != nil && f.ahead == nil && !f.inMem {
			if n := int64(wire.ChunkBlocks(bl.BlockSize)) * bl.BlockSize; int64(len(dbuf)) < n {
				dbuf = make([]byte, n)
			}
			dext, zero, hashes, perr := s.deltaPlan(f, e, bl, dbuf, ctr)
			if perr != nil {
				// Nothing of it is in the stream: left out, its
				// temporary dropped.
				f.Close()
				failed = append(failed, Error{i, perr})
				continue
			}
			if deltaHook != nil {
				deltaHook(e.Path)
			}
			sent := wire.DataSize(e.DataLen(), dext)
			dw, err := ts.beginDelta(e, dext, zero, xs)
			if err != nil {
				f.Close()
				return nil, nil, nil, err
			}
			changed, werr := s.sendDelta(dw, f, e.DataOff(), dext, bl.BlockSize, hashes, dbuf)
			if werr != nil {
				f.Close()
				return nil, nil, nil, werr
			}
			if changed == nil {
				changed = s.Recheck(f, e)
			}
			f.Close()
			if changed != nil {
				failed = append(failed, Error{i, changed})
				discards = append(discards, wire.Discard{Index: i, Reason: changed.Error()})
			} else {
				if hash {
					sums = append(sums, wire.IndexedSum{Index: i, Sum: wire.DeltaSum(e.DataLen(), bl.BlockSize, hashes)})
				}
				*deltas = append(*deltas, Delta{Index: i, Size: e.DataLen(), Sent: sent})
			}
			if err := ts.end(e); err != nil {
				return nil, nil, nil, err
			}
			if ctr != nil {
				ctr.BytesSent.Add(sent)
				ctr.DeltaSaved.Add(e.DataLen() - sent)
				ctr.FilesSent.Add(1)
			}
			continue
		}
		size := wire.DataSize(e.DataLen(), ext)
		src.r, src.err = nil, nil
		// The limit outside the tracker: the end of the body is no read,
		// and costs no clock reading.
		lim.R, lim.N = &src, size
		var n int64
		var dw io.Writer
		var werr error
		if fs, ok := w.(FileSender); ok && ext == nil && f.ahead == nil && !f.inMem && size >= fs.SendFileMin() && s.Limit.Rate() <= 0 {
			// Straight from the page cache to the socket.
			if dw, err = ts.beginBare(e, xs); err != nil {
				f.Close()
				return nil, nil, nil, err
			}
			n, src.err, werr = fs.SendFile(f.fd, size)
			if src.err == ErrNoSendfile {
				src.err, src.r = nil, f
				n, werr = io.CopyBuffer(dw, &lim, *bp)
			}
		} else {
			if dw, err = ts.beginExtra(e, ext, xs); err != nil {
				f.Close()
				return nil, nil, nil, err
			}
			fr := DataReader(f, ext)
			if f.ahead == nil && !f.inMem { // (read ahead: paced already; the ring reads only an unpaced source)
				fr = ratelimit.Reader(fr, s.Limit)
			}
			src.r = fr
			var in io.Reader = &lim
			if hash {
				h.Reset()
				if ext != nil {
					wire.HashExtents(h, ext)
				}
				// Hashed in the same pass that copies it.
				tee.r, tee.h = &lim, h
				in = &tee
			}
			n, werr = io.CopyBuffer(dw, in, *bp)
		}
		if werr != nil && src.err == nil {
			f.Close()
			return nil, nil, nil, werr
		}
		if n < size { // shrank, or a read error: pad, and withdraw it
			if _, err := io.CopyBuffer(dw, io.LimitReader(zeros{}, size-n), *bp); err != nil {
				f.Close()
				return nil, nil, nil, err
			}
			why := src.err
			if why == nil {
				why = f.notRegular()
			}
			if why == nil {
				why = fmt.Errorf("read %s: %w while being read (shrank to %d bytes)", f.Name(), ErrChanged, n)
			}
			failed = append(failed, Error{i, why})
			discards = append(discards, wire.Discard{Index: i, Reason: why.Error()})
		} else if cerr := s.Recheck(f, e); cerr != nil {
			failed = append(failed, Error{i, cerr})
			discards = append(discards, wire.Discard{Index: i, Reason: cerr.Error()})
		} else if hash {
			sums = append(sums, wire.IndexedSum{Index: i, Sum: h.Sum128().Bytes()})
		}
		f.Close()
		if err := ts.end(e); err != nil {
			return nil, nil, nil, err
		}
		if ctr != nil {
			ctr.BytesSent.Add(e.DataLen())
			if e.Off == 0 {
				ctr.FilesSent.Add(1)
			}
		}
	}
	return discards, failed, sums, ts.close()
}

// hashTee is io.TeeReader into a hash, which never fails to take a write:
// one per batch, reused file after file.
type hashTee struct {
	r io.Reader
	h *xxh3.Hasher128
}

func (t *hashTee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.h.Write(p[:n])
	}
	return n, err
}

// readTracker remembers a read error, to tell a failure of the source file
// (only that file is lost) from a failure of the stream (all is lost).
type readTracker struct {
	r   io.Reader
	err error
	ctr *metrics.Stream // if set, read time is accounted
	// scale: the read time stands for that many files' (0: not timed)
	scale int
}

// sampledMax is the largest file whose reads are timed only by sample.
const sampledMax = 64 << 10

func (t *readTracker) Read(p []byte) (int, error) {
	if t.ctr != nil && t.scale > 0 {
		start := time.Now()
		defer func() { t.ctr.ReadNanos.Add(int64(time.Since(start)) * int64(t.scale)) }()
	}
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}
