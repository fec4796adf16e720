// Package extract is the receiving side of bulkmove: it installs batches of
// entries under a destination root, safely, whoever the sender is.
//
// Every file operation is made in the descriptor of its directory, opened
// beneath the destination with no symlink followed on the way (openDir),
// so no name, symlink or hard link can reach outside it, and no directory
// of the destination swapped for a symlink while a job runs is written
// through. Names must be local (filepath.IsLocal). Regular files are
// written under a temporary name in their target directory and renamed
// into place when the batch commits, so a final name never holds a
// partial file. Symlinks and hard links arrive only in final batches, after
// all file data (the sender orders them so); hard links may only point at
// regular files this receiver wrote or verified in this session. Device
// nodes and FIFOs cannot even be expressed on the wire; setuid and setgid
// bits are dropped unless asked for. Metadata (mode, owner, times) is
// applied through the open file descriptor, never by a second path lookup
// that a symlink could redirect.
package extract

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/hashidx"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// TempPrefix starts the name of every temporary file the receiver creates,
// so that leftovers of an interrupted run can be recognised and removed.
const TempPrefix = ".bulkmove.tmp."

// Options say how to install entries.
type Options struct {
	Fsync     bool // fsync files before rename and directories before the ack
	Owner     bool // chown to the entry's uid/gid (needs root)
	KeepSetid bool // keep setuid/setgid bits
	NoCheck   bool // send everything: skip the size-and-mtime quick check
	// Check is how Need decides that a file is up to date: one of the
	// wire.Check* modes ("": quick, or none with NoCheck).
	Check string
	// WriteRate, if positive, paces writing file data (bytes a second,
	// shared by all batches): gentle on a destination that serves
	// production, and how tests make the receiver the bottleneck.
	WriteRate int64
	// NamedTemps writes every file under a named temporary and renames it,
	// as where O_TMPFILE is missing (for tests of that path).
	NamedTemps bool
	// IOConcurrency is how many files a batch writes (and checks, and
	// renames) at once: 0 chooses from the measured latency of the
	// destination filesystem (one at a time on a local disk, many on NFS);
	// see package ioconc.
	IOConcurrency int
	// Xattrs, ACLs and Sparse: what the sender may send and the receiver
	// applies (see xattr.go and sparse.go).
	Xattrs, ACLs, Sparse bool
	// NoSums: the sender sends no content hashes; none are made, and
	// bodies from a Splicer go into their files by splice (splice.go).
	NoSums bool
	// Delete: the sender deletes what the source lacks (--delete), so a
	// non-empty directory in the way of a file or a symlink is removed
	// with all it holds (see inway.go).
	Delete bool
}

// FromWire converts the handshake's options as they are, for a receiver
// whose sender is trusted with all of them (a local copy); a receiver
// serving another side grants them within its Policy (Grant).
func FromWire(o *wire.ReceiveOptions) Options {
	if o == nil {
		return Options{}
	}
	// Owners can only be given away with CAP_CHOWN (root): elsewhere files
	// belong to the receiving user, as with rsync run by an ordinary user.
	return Options{Fsync: o.Fsync, Owner: o.Owner && canChown, KeepSetid: o.KeepSetid, NoCheck: o.Check == wire.CheckNone,
		Check: o.Check, WriteRate: o.WriteRate, IOConcurrency: o.IOConcurrency, Xattrs: o.Xattrs, ACLs: o.ACLs, Sparse: o.Sparse, NoSums: o.NoSums, Delete: o.Delete}
}

// check is the check mode in force.
func (o *Options) check() string {
	switch {
	case o.NoCheck:
		return wire.CheckNone
	case o.Check == "":
		return wire.CheckQuick
	}
	return o.Check
}

// Checksums reports whether Need compares content hashes: the sender must
// then pass each file's Sum to NeedSums.
func (r *Receiver) Checksums() bool { return r.opt.check() == wire.CheckSum }

// Receiver installs entries under one root. It is safe for concurrent use
// by several batches at once.
type Receiver struct {
	dir string
	opt Options
	// rootDir is the root open: every directory is opened beneath it,
	// with no symlink followed (see openDir).
	rootDir *os.File

	mu sync.Mutex
	// Hard-link targets written or verified this session, by a 64-bit
	// hash of the path: up to KnownMem in memory, the rest on disk (see
	// known.go). A path whose hash collides with a known one's (2^-64 a
	// pair) would pass for known: a link to it is then made all the same
	// (still only to a regular file under the root).
	known *hashidx.Set
	dirs  map[string]bool // directories known to exist, true if this receiver made them (a cache, reset when large)
	// looked holds the directories that a quick check (Need) found to be
	// directories, with --delete (see seenDir): a cache apart from dirs,
	// whose resets cost the knowledge of what this receiver made.
	looked map[string]struct{}
	// landed holds the files placed in directories of dirs that this
	// receiver made, by a hash of the path: what Need must still look up
	// there (see needRange). Reset with dirs.
	landed map[uint64]struct{}
	// creating holds the directories a file is being created in under
	// its final name (createInPlace, on a slow filesystem).
	creating map[string]bool

	linkMode int // how unnamed temporary files are linked; see probeLink and linking
	linkOnce sync.Once
	swept    map[string]struct{} // directories cleared of stale temporaries (under mu)
	limit    *ratelimit.Bucket

	files      atomic.Int64
	bytes      atomic.Int64
	skipped    atomic.Int64
	errs       atomic.Int64
	writeNanos atomic.Int64
	fsyncNanos atomic.Int64

	// io measures the destination's latency per file operation and says
	// how many to run at once.
	io *ioconc.Gauge

	staging  stage          // see stage.go
	sweeps   sync.WaitGroup // directories being swept aside (see sweep)
	sweeping atomic.Int64

	// withdrawn holds the partials (by directory and name) of split
	// files whose sender withdrew a range (see partial.go): later ranges
	// of that version are refused rather than begin a partial again.
	withdrawn  sync.Map
	withdrawnN atomic.Int64
}

// Open creates dir if needed and opens it as the receiver's root.
func Open(dir string, opt Options) (*Receiver, error) {
	if err := opt.valid(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create destination: %w", err)
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open destination: %w", err)
	}
	return newReceiver(d, dir, opt)
}

// valid reports an option the receiver does not know.
func (o *Options) valid() error {
	switch c := o.check(); c {
	case wire.CheckQuick, wire.CheckNone, wire.CheckSize, wire.CheckExisting, wire.CheckSum:
		return nil
	default:
		return fmt.Errorf("unknown check mode %q (this receiver knows %s, %s, %s, %s and %s)",
			c, wire.CheckQuick, wire.CheckNone, wire.CheckSize, wire.CheckExisting, wire.CheckSum)
	}
}

// newReceiver is a receiver working beneath the directory rootDir (which
// it then owns), named dir in messages.
func newReceiver(rootDir *os.File, dir string, opt Options) (*Receiver, error) {
	r := &Receiver{rootDir: rootDir, dir: dir, opt: opt, known: hashidx.NewSet("", KnownMem), dirs: map[string]bool{}, landed: map[uint64]struct{}{},
		limit: ratelimit.New(opt.WriteRate)}
	r.io = ioconc.Auto(0)
	if opt.IOConcurrency > 0 {
		r.io = ioconc.Fixed(opt.IOConcurrency)
	} else {
		r.probeLatency()
	}
	return r, nil
}

// probeLatency gives the auto gauge its first measure before any batch: a
// lookup each of a few names that do not exist, all at once (one round
// trip on a network filesystem, microseconds on a local disk). Without it
// the gauge knows nothing at the first batch, which then ran one file at a
// time: on a 1 ms filesystem, 141 files in 1.2 s of a 1.3 s copy.
func (r *Receiver) probeLatency() {
	dfd := int(r.rootDir.Fd())
	var wg sync.WaitGroup
	for k := range probeLookups {
		wg.Go(func() {
			var st unix.Stat_t
			start := time.Now()
			unix.Fstatat(dfd, TempPrefix+tmpTag+".probe."+strconv.Itoa(k), &st, unix.AT_SYMLINK_NOFOLLOW)
			r.io.Since(start)
		})
	}
	wg.Wait()
}

// probeLookups is how many lookups probeLatency times: a window of the
// gauge, whose smallest counts.
const probeLookups = 8

// linking returns how unnamed temporary files are linked into place,
// probed at the first file written (the probe links and unlinks a file in
// the root, which changes its mtime: a receiver that only compares must
// not).
func (r *Receiver) linking() int {
	r.linkOnce.Do(func() {
		if r.opt.NamedTemps {
			r.linkMode = linkNone
			return
		}
		r.linkMode = probeLink(r.rootDir)
	})
	return r.linkMode
}

// Close releases the destination.
func (r *Receiver) Close() error {
	r.sweeps.Wait()
	r.closeStage()
	r.known.Close()
	return r.rootDir.Close()
}

// noOpenat2 is set once openat2 turned out to be missing or refused.
var noOpenat2 atomic.Bool

// openDir opens the directory p under the root, following no symlink on
// the way or at its end (flags may add open flags). Every create, link,
// rename and unlink of the receiver is made in a descriptor opened so, and
// each directory is opened once a batch (Txn.dir): a directory of DEST
// that a local user swaps for a symlink (to another directory of DEST, or
// out of it) is refused, never written through, and a swap after the open
// changes nothing, as the descriptor holds the directory itself. One
// openat2 where the kernel has it (a walk costs a lookup a component: on
// a network filesystem, a round trip each), else walkDir; where openat2
// refuses the path, walkDir says which component is not a directory.
func (r *Receiver) openDir(p string, flags int) (*os.File, error) {
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(int(r.rootDir.Fd()), p, &how)
		switch err {
		case nil:
			return os.NewFile(uintptr(fd), p), nil
		case unix.ENOENT, unix.EACCES:
			return nil, &fs.PathError{Op: "open", Path: p, Err: err}
		case unix.ENOSYS, unix.EPERM:
			noOpenat2.Store(true) // too old a kernel, or a seccomp filter
		}
		// ELOOP (a symlink), ENOTDIR (a file), EAGAIN (a rename raced
		// the lookup): the walk tells which component, or opens the
		// directory now that it is one again.
	}
	return r.walkDir(p, flags)
}

// walkDir is openDir a component at a time, each opened with O_NOFOLLOW
// in the descriptor of the one before.
func (r *Receiver) walkDir(p string, flags int) (*os.File, error) {
	fd, err := unix.Openat(int(r.rootDir.Fd()), ".", dirFlags|flags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: r.dir, Err: err}
	}
	if p == "." {
		return os.NewFile(uintptr(fd), p), nil
	}
	for at := 0; at < len(p); {
		end := strings.IndexByte(p[at:], '/')
		if end < 0 {
			end = len(p)
		} else {
			end += at
		}
		c := p[at:end]
		if c == "" || c == "." || c == ".." {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "open", Path: p, Err: errors.New("name is not a local path")}
		}
		f := 0
		if end == len(p) {
			f = flags
		}
		nfd, err := r.openSub(fd, c, p[:end], f)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd, at = nfd, end+1
	}
	return os.NewFile(uintptr(fd), p), nil
}

// dirFlags open a directory to work in.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openSub opens the directory name in dfd (p under the root), following
// no symlink. Where name is not a directory, the error says what it is (a
// notDirError); where it is one again when looked at (swapped out and
// back meanwhile), it is opened again.
func (r *Receiver) openSub(dfd int, name, p string, flags int) (int, error) {
	for tries := 1; ; tries++ {
		fd, err := unix.Openat(dfd, name, dirFlags|flags, 0)
		if err == nil {
			return fd, nil
		}
		if err != unix.ELOOP && err != unix.ENOTDIR {
			return -1, &fs.PathError{Op: "open", Path: p, Err: err}
		}
		nd := &notDirError{Path: filepath.Join(r.dir, p), Is: "swapped while being opened", at: p}
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				if tries < 3 {
					continue
				}
			case unix.S_IFLNK:
				nd.Is = "a symlink"
			default:
				nd.Is = "not a directory"
			}
		}
		return -1, nd
	}
}

// notDirError: a directory on the way to an entry is not one. A symlink
// there is never followed: one that a local user swapped for a directory
// of DEST while a job runs would send its entries into another directory,
// or out of DEST.
type notDirError struct {
	Path string // as the user names it: under the receiver's Dir
	Is   string // what it is: "a symlink", "not a directory", ...
	at   string // its path under the root, where known
}

func (e *notDirError) Error() string {
	if e.Is == "a symlink" {
		return e.Path + ": is a symlink, not a directory; nothing written through it"
	}
	return e.Path + ": " + e.Is + "; nothing written there"
}

func (e *notDirError) Unwrap() error {
	if e.Is == "a symlink" {
		return syscall.ELOOP
	}
	return syscall.ENOTDIR
}

// Dir is the destination directory.
func (r *Receiver) Dir() string { return r.dir }

// Identity names the destination directory itself, not its path: its
// filesystem's device, its inode and, where the filesystem keeps them, its
// birth time and its inode's generation ("dev=0:45 ino=2
// born=1700000000.123456789 gen=1358831529"; an inode number can be
// reused at once, ext4's generation is drawn anew each time, and tmpfs
// keeps a birth time). A directory deleted and made anew under the same
// name, or another filesystem mounted there, has another identity (the
// sender's resume journal is bound to it: journal.Destination). "" if it
// cannot be read.
func (r *Receiver) Identity() string {
	fd := int(r.rootDir.Fd())
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_INO == 0 {
		return ""
	}
	id := fmt.Sprintf("dev=%d:%d ino=%d", st.Dev_major, st.Dev_minor, st.Ino)
	if st.Mask&unix.STATX_BTIME != 0 && st.Btime.Sec != 0 {
		id += fmt.Sprintf(" born=%d.%09d", st.Btime.Sec, st.Btime.Nsec)
	}
	if gen, err := unix.IoctlGetUint32(fd, fsIocGetVersion); err == nil {
		id += fmt.Sprintf(" gen=%d", gen)
	}
	return id
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long), which
// golang.org/x/sys/unix does not define: the kernel answers with the
// inode's generation, an int.
const fsIocGetVersion = 2<<30 | uint(unsafe.Sizeof(uintptr(0)))<<16 | 'v'<<8 | 1

// Totals reports what this receiver installed so far.
func (r *Receiver) Totals() wire.Totals {
	return wire.Totals{Files: r.files.Load(), Bytes: r.bytes.Load(), Skipped: r.skipped.Load(), Errors: r.errs.Load(),
		WriteNanos: r.writeNanos.Load(), FsyncNanos: r.fsyncNanos.Load()}
}

// CheckName reports whether p is a name the receiver will create: local,
// slash-separated, clean, no empty or NUL-containing component. "." (the
// root itself) is allowed only for directories.
func CheckName(p string, k sharder.Kind) error {
	if p == "." && k == sharder.KindDir {
		return nil
	}
	if p == "" || len(p) > wire.MaxPath || strings.IndexByte(p, 0) >= 0 {
		return errors.New("invalid name")
	}
	if path.Clean(p) != p || !isLocal(p) {
		return errors.New("name is not a local path")
	}
	for c := p; c != ""; {
		n := strings.IndexByte(c, '/')
		if n < 0 {
			n = len(c)
		}
		if n > 255 {
			return errors.New("name component longer than 255 bytes")
		}
		c = c[min(n+1, len(c)):]
	}
	return nil
}

func isLocal(p string) bool {
	if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
		return false
	}
	return true
}

// Need runs the quick check: for each regular file, whether the
// destination lacks an up-to-date copy. Entries of other kinds are always
// needed. Up to date depends on the check mode (Options.Check):
//   - quick: a regular file of the same size and mtime;
//   - size: a regular file of the same size (--size-only);
//   - existing: any regular file (--ignore-existing);
//   - checksum: a regular file of the same size and content hash as the
//     manifest's (NeedSums; a file without a sum is needed);
//   - none: never, but for a file the sender's resume journal names
//     (Entry.Resumed): as quick.
//
// In size and checksum modes, a file that is up to date but has another
// mtime, mode or (as root) owner than the entry gets the entry's, without
// its data being sent; where that fails the file is needed.
func (r *Receiver) Need(entries []sharder.Entry) []bool { return r.NeedSums(entries, nil) }

// NeedSums is Need given the manifest's content hashes (checksum mode):
// each file of the right size is read and hashed, by up to hashWorkers at
// once.
func (r *Receiver) NeedSums(entries []sharder.Entry, sums []wire.Sum) []bool {
	need := make([]bool, len(entries))
	var hashOnce sync.Once
	var hash *sumPool // started at the first file to hash
	toHash := func(j sumJob) {
		hashOnce.Do(func() { hash = r.startSums(entries, sums, need) })
		hash.jobs <- j
	}
	// A stat per file, a directory's files together (one open of each):
	// a batch's files come from several directories, in chunks that
	// interleave as the walk reads them in parallel, or in turn where the
	// batch is spread. On a slow filesystem, parts of the batch at once,
	// each holding whole directories where it can.
	order := byDir(entries)
	parts := min(r.io.Width(), (len(entries)+15)/16)
	ioconc.ForEach(parts, parts, func(_, k int) {
		r.needRange(entries, order[k*len(order)/parts:(k+1)*len(order)/parts], sums, need, toHash)
	})
	if hash != nil {
		hash.wait()
	}
	for i := range entries {
		// A range its partial already holds (see partial.go).
		if need[i] && entries[i].Kind == sharder.KindFile && entries[i].IsRange() && r.rangeLanded(&entries[i]) {
			need[i] = false
		}
	}
	return need
}

// byDir returns the indexes of entries with each directory's together, the
// directories in the order they first come, each one's entries in theirs.
func byDir(entries []sharder.Entry) []int {
	groups := map[string]int{} // a directory's number, in order of coming
	of := make([]int, len(entries))
	for i := range entries {
		d := parentOf(entries[i].Path)
		g, ok := groups[d]
		if !ok {
			g = len(groups)
			groups[d] = g
		}
		of[i] = g
	}
	if len(groups) <= 1 {
		for i := range of {
			of[i] = i
		}
		return of
	}
	start := make([]int, len(groups)+1) // where each directory's run begins
	for _, g := range of {
		start[g+1]++
	}
	for g := range len(groups) {
		start[g+1] += start[g]
	}
	order := make([]int, len(entries))
	for i, g := range of {
		order[start[g]] = i
		start[g]++
	}
	return order
}

// parentOf is p's directory as a key: what path.Dir gives, without its
// copy ("" for a name at the top).
func parentOf(p string) string { return p[:max(0, strings.LastIndexByte(p, '/'))] }

// needRange is NeedSums for the entries at the indexes idx.
func (r *Receiver) needRange(entries []sharder.Entry, idx []int, sums []wire.Sum, need []bool, toHash func(sumJob)) {
	mode := r.opt.check()
	var cur *os.File // the directory of the previous entry, nil if missing
	curDir := "\x00"
	opened, made := false, false // cur: opened yet; made by this receiver
	slow := landSlow(r)          // lookups cost round trips: see landSlow
	lookups := 0
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	for _, i := range idx {
		e := &entries[i]
		need[i] = true
		m := mode
		if m == wire.CheckNone && e.Resumed {
			m = wire.CheckQuick // the sender's journal says it landed: DEST confirms
		}
		if e.Kind != sharder.KindFile || m == wire.CheckNone || CheckName(e.Path, e.Kind) != nil {
			continue
		}
		d, base := path.Split(e.Path)
		if d = strings.TrimSuffix(d, "/"); d == "" {
			d = "."
		}
		if d != curDir {
			// One open per directory: idx keeps a directory's files together.
			if cur != nil {
				cur.Close()
			}
			curDir, cur, opened, made = d, nil, false, r.made(d)
		}
		// A directory this receiver made was empty then: a file it has
		// not placed there since is not there, and needed without a
		// lookup (on a slow filesystem a round trip a file, under the
		// directory's lock that the commits of other batches hold to link
		// theirs in).
		if made && slow && !e.IsRange() && !r.placed(e.Path) {
			continue
		}
		if !opened {
			opened = true
			if f, err := r.openDir(d, 0); err == nil {
				cur = f
				r.lookedAt(d)
			}
		}
		if cur == nil {
			continue
		}
		var st unix.Stat_t
		// One lookup in eight feeds the latency gauge: a sample shows a
		// slow filesystem as well, without two clock reads and the
		// gauge's lock for every file of a pass that finds them all in
		// place.
		timed := lookups%8 == 0
		lookups++
		var start time.Time
		if timed {
			start = time.Now()
		}
		if err := unix.Fstatat(int(cur.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if timed {
			r.io.Since(start)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		switch m {
		case wire.CheckQuick:
			if st.Size != e.Size || st.Mtim.Nano() != e.MTime {
				continue
			}
		case wire.CheckSize:
			if st.Size != e.Size || !r.refreshAt(int(cur.Fd()), base, &st, e) {
				continue
			}
		case wire.CheckSum:
			if st.Size != e.Size || i >= len(sums) || sums[i] == (wire.Sum{}) {
				continue
			}
			if e.Size == 0 {
				if sums[i] != wire.EmptySum || !r.refreshAt(int(cur.Fd()), base, &st, e) {
					continue
				}
				break
			}
			fd, err := unix.Openat(int(cur.Fd()), base, readFlags, 0)
			if err != nil {
				continue // unreadable: needed
			}
			toHash(sumJob{i, fd})
			continue
		}
		need[i] = false
		if e.Nlink > 1 {
			r.remember(e.Path)
		}
	}
}

// hashWorkers bounds the files of one batch hashed at once: a few, as
// every stream runs its own batch.
const hashWorkers = 4

// readFlags open a destination file to hash it or fix its metadata: never
// through a symlink, and never blocking on a FIFO swapped in.
const readFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

type sumJob struct{ i, fd int }

// sumPool hashes a batch's candidate files and clears need for those whose
// content is the sender's. The channel is unbuffered, so at most
// hashWorkers + 1 of them are open at once.
type sumPool struct {
	jobs chan sumJob
	wg   sync.WaitGroup
}

func (r *Receiver) startSums(entries []sharder.Entry, sums []wire.Sum, need []bool) *sumPool {
	p := &sumPool{jobs: make(chan sumJob)}
	for range hashWorkers {
		p.wg.Go(func() {
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for j := range p.jobs {
				e := &entries[j.i]
				if r.sameSum(j.fd, e, sums[j.i], *bp) {
					need[j.i] = false
					if e.Nlink > 1 {
						r.remember(e.Path)
					}
				}
			}
		})
	}
	return p
}

func (p *sumPool) wait() {
	close(p.jobs)
	p.wg.Wait()
}

// sameSum reports whether the open file fd has e's size and content sum,
// and then brings its metadata in line with e. It closes fd.
func (r *Receiver) sameSum(fd int, e *sharder.Entry, sum wire.Sum, buf []byte) bool {
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != e.Size {
		return false
	}
	got, n, err := wire.HashReader(fdReader(fd), buf)
	if err != nil || n != e.Size || got != sum {
		return false
	}
	return r.refresh(fd, &st, e) == nil
}

// fdReader reads a bare descriptor.
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// stale reports whether an up-to-date file's metadata differ from e's.
func (r *Receiver) stale(st *unix.Stat_t, e *sharder.Entry) bool {
	t := Txn{r: r}
	return st.Mtim.Nano() != e.MTime || st.Mode&0o7777 != unixmode.Of(t.mode(e.Mode)) ||
		r.opt.Owner && (st.Uid != e.UID || st.Gid != e.GID)
}

// refresh gives the open file fd, whose content is up to date, e's owner
// (as root), mode and mtime where they differ.
func (r *Receiver) refresh(fd int, st *unix.Stat_t, e *sharder.Entry) error {
	if !r.stale(st, e) {
		return nil
	}
	t := Txn{r: r}
	want := unixmode.Of(t.mode(e.Mode))
	// Owner first: chown clears setuid bits.
	chown := r.opt.Owner && (st.Uid != e.UID || st.Gid != e.GID)
	if chown {
		if err := unix.Fchown(fd, int(e.UID), int(e.GID)); err != nil {
			return err
		}
	}
	if chown || st.Mode&0o7777 != want {
		if err := unix.Fchmod(fd, want); err != nil {
			return err
		}
	}
	if st.Mtim.Nano() != e.MTime {
		return futimens(fd, e.MTime)
	}
	return nil
}

// refreshAt is refresh for the file base in directory dfd, opened only
// when its metadata are stale. It reports whether the file is now up to
// date.
func (r *Receiver) refreshAt(dfd int, base string, st *unix.Stat_t, e *sharder.Entry) bool {
	if !r.stale(st, e) {
		return true
	}
	fd, err := unix.Openat(dfd, base, readFlags, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if unix.Fstat(fd, &now) != nil || now.Mode&unix.S_IFMT != unix.S_IFREG || now.Size != e.Size {
		return false
	}
	return r.refresh(fd, &now, e) == nil
}

// Txn installs one batch: files are written under temporary names, then
// Commit renames them into place. Write, Apply and Skip may be called from
// several goroutines at once for different entries (a receiver on a
// high-latency filesystem writes many files at once); Begin, Commit and
// Abort may not overlap them.
type Txn struct {
	r       *Receiver
	entries []sharder.Entry

	mu      sync.Mutex
	dirs    map[string]*txnDir // target directories of this batch
	pending []pendingFile
	errs    []wire.EntryError
	files   int64
	bytes   int64
	skipped int64
	// where the time went
	writeNanos, fsyncNanos int64
	// setgidDir: some target directory is setgid, so new files may not get
	// the creator's group.
	setgidDir atomic.Bool
	// xattrs are the manifest's attributes of directories and symlinks,
	// set by SetXattrs before ApplyFinal.
	xattrs [][]wire.Xattr
	// Files WriteThen places before Commit: placing counts them, placers
	// bounds them by target directory (see settle).
	placing sync.WaitGroup
	placers map[*os.File]chan struct{}
	// spread: the batch's files come from many directories, a few each
	// (see createInPlace).
	spread bool
}

// txnDir is a target directory of a batch, opened (and created) once by
// whichever writer needs it first; the others wait for it.
type txnDir struct {
	once sync.Once
	f    *os.File
	err  error
}

type pendingFile struct {
	index  int
	dir    *os.File
	tmp    string // the temporary name, or "" for an unnamed file held by fd
	fd     int
	base   string
	sum    wire.Sum // XXH3-128 of what was written, if summed
	summed bool
	placed bool // under its final name (Commit)
	sdir   int  // the staging directory's descriptor when tmp is there (see stage.go), else 0
	held   int  // with sdir: an O_PATH descriptor of the staged file to link it from, or -1
	// settled: placed, or failed to be, before Commit (WriteThen);
	// nothing left to do for it.
	settled bool
	// part, for a range of a split file, is its partial's name; fd is
	// then the partial, open (see partial.go).
	part string
	// size is the bytes written: counted once they landed (Commit).
	size int64
}

// direct reports whether p was written under its final name (see
// createInPlace): placing it is only counting it, dropping it removes it.
// (A temporary's name carries this process's random tmpTag: an entry of
// that very name would be in place once written either way.)
func (p *pendingFile) direct() bool { return p.tmp != "" && p.tmp == p.base }

func sumOf(h *xxh3.Hasher128) wire.Sum {
	if h == nil {
		return wire.Sum{}
	}
	return h.Sum128().Bytes()
}

// IOWidth is how many files to write at once now (see Options.IOConcurrency).
func (r *Receiver) IOWidth() int { return r.io.Width() }

// IOLatency is the destination's measured latency per file operation.
func (r *Receiver) IOLatency() time.Duration { return r.io.Latency() }

// Begin starts a batch over entries.
func (r *Receiver) Begin(entries []sharder.Entry) *Txn {
	return &Txn{r: r, entries: entries, dirs: map[string]*txnDir{}, spread: landSlow(r) && spread(entries)}
}

// Slow reports whether the destination's file operations wait on a device
// or a server (more than one at once is worth it): a sender then spreads
// each batch over many directories (sharder.Options.Spread).
func (r *Receiver) Slow() bool { return landSlow(r) }

// spread reports whether the regular files of entries take their
// directories in turn: at most one in four follows a file of its own
// directory. (Not how many directories the batch has: what the receiver
// has in flight at once is a window of the batch, and a batch taking 10
// directories in turn may hold dozens of files of each.)
func spread(entries []sharder.Entry) bool {
	pairs, same := 0, 0
	prev := ""
	first := true
	for i := range entries {
		if entries[i].Kind != sharder.KindFile {
			continue
		}
		d := parentOf(entries[i].Path)
		if !first {
			pairs++
			if d == prev {
				same++
			}
		}
		prev, first = d, false
	}
	return pairs > 0 && 4*same <= pairs
}

// Skip counts entry i as already up to date (a split file once, by its
// first range).
func (t *Txn) Skip(i int) {
	if i >= len(t.entries) || t.entries[i].Off == 0 {
		t.count(0, 0, 1)
	}
}

// count adds to the batch's totals.
func (t *Txn) count(files, bytes, skipped int64) {
	t.mu.Lock()
	t.files += files
	t.bytes += bytes
	t.skipped += skipped
	t.mu.Unlock()
}

// dir opens (and creates) the parent directory of p, once per batch.
func (t *Txn) dir(p string) (*os.File, string, error) {
	d, base := path.Split(p)
	d = strings.TrimSuffix(d, "/")
	if d == "" {
		d = "."
	}
	t.mu.Lock()
	td, ok := t.dirs[d]
	if !ok {
		td = &txnDir{}
		t.dirs[d] = td
	}
	t.mu.Unlock()
	td.once.Do(func() { td.f, td.err = t.openDir(d) })
	return td.f, base, td.err
}

func (t *Txn) openDir(d string) (*os.File, error) {
	seen := t.r.seenDir(d)
	f, err := t.r.makeDir(d)
	if wayBlocked(err) && !seen {
		// Not a directory there, or not one reached without a symlink
		// (see inway.go).
		f, err = t.r.openWay(d)
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_ISGID != 0 {
		t.setgidDir.Store(true)
	}
	if t.r.linking() == linkNone && !t.r.made(d) {
		// Named temporaries are only used where O_TMPFILE is not: only
		// there can a killed run have left many behind. (With O_TMPFILE,
		// only the instant of a replace can leave one; --delete removes
		// those.) A directory this receiver made holds none.
		t.r.sweep(d, f)
	}
	return f, nil
}

// staleTemp is the age after which a temporary file of another run that
// nobody writes any more is taken for a leftover of an interrupted run.
// A variable for tests.
var staleTemp = 15 * time.Minute

// stale reports whether st (a temporary file or staging directory of
// another run) is older than staleTemp by both its mtime and its ctime: a
// live temporary gets its source's mtime, often years old, before it takes
// its name, but setting it makes the ctime now.
func stale(st *unix.Stat_t) bool {
	return time.Since(time.Unix(0, max(st.Mtim.Nano(), st.Ctim.Nano()))) > staleTemp
}

// sweep removes, once per directory and receiver, temporary files that
// interrupted runs left in dir: named ones exist where O_TMPFILE does not
// (and, briefly, while a file replaces another). A temporary file still
// being written by a concurrent run is newer than staleTemp.
func (r *Receiver) sweep(d string, f *os.File) {
	r.mu.Lock()
	if r.swept == nil {
		r.swept = map[string]struct{}{}
	}
	_, done := r.swept[d]
	if !done && len(r.swept) < 1<<16 {
		r.swept[d] = struct{}{}
	}
	r.mu.Unlock()
	if done {
		return
	}
	// Its own handle on the directory: the batch may close f first.
	g, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return
	}
	// Reading a whole directory costs a round trip per chunk (on some
	// filesystems, per name): done aside, not before the batch's first
	// file, unless many are being swept already.
	if r.sweeping.Add(1) > maxSweeps {
		r.sweeping.Add(-1)
		sweepDir(g)
		return
	}
	r.sweeps.Go(func() {
		defer r.sweeping.Add(-1)
		sweepDir(g)
	})
}

// maxSweeps is how many directories are swept aside at once.
const maxSweeps = 8

// sweepDir removes the stale temporary files of the directory g, and
// closes it.
func sweepDir(g *os.File) {
	defer g.Close()
	dfd := int(g.Fd())
	for {
		names, err := g.Readdirnames(1024) // a huge directory in chunks
		for _, n := range names {
			if !strings.HasPrefix(n, TempPrefix) || strings.HasPrefix(n, TempPrefix+tmpTag+".") {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			if stale(&st) {
				unix.Unlinkat(dfd, n, 0)
			}
		}
		if err != nil || len(names) == 0 {
			return
		}
	}
}

// makeDir opens directory d under the root (see openDir), first making it
// and each missing parent, one at a time from the top: each is made with
// mkdirat in its parent's descriptor and opened from there, so that a
// parent this receiver made is known to be made (its new files then go in
// under their names: createInPlace).
func (r *Receiver) makeDir(d string) (*os.File, error) {
	r.mu.Lock()
	_, known := r.dirs[d]
	r.mu.Unlock()
	if known || d == "." {
		f, err := r.openDir(d, 0)
		if d == "." || !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
		// Removed since it was made or seen: made again.
	}
	parent, base := path.Split(d)
	if parent = strings.TrimSuffix(parent, "/"); parent == "" {
		parent = "."
	}
	pf, err := r.openDir(parent, 0)
	if errors.Is(err, fs.ErrNotExist) && parent != "." {
		pf, err = r.makeDir(parent)
	}
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	pfd := int(pf.Fd())
	// Directories are created owner-writable while the job runs; their
	// real mode is applied by a final batch, after their contents.
	err = unix.Mkdirat(pfd, base, 0o700)
	made := err == nil
	if err != nil && err != unix.EEXIST {
		return nil, &fs.PathError{Op: "mkdir", Path: d, Err: err}
	}
	fd, err := r.openSub(pfd, base, d, 0)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.dirs) > 1<<16 {
		r.forgetDirs()
	}
	// (Another of this receiver's writers may have made it meanwhile, and
	// said so: a lost race to make it does not unmake it.)
	r.dirs[d] = r.dirs[d] || made
	// Its parents were opened on the way, as directories: one of them
	// that is anything else later was swapped in meanwhile (see seenDir).
	// Whoever recorded one recorded its parents too.
	for p := parentOf(d); p != ""; p = parentOf(p) {
		if _, ok := r.dirs[p]; ok {
			break
		}
		r.dirs[p] = false
	}
	r.mu.Unlock()
	return os.NewFile(uintptr(fd), d), nil
}

// mkdirAll is makeDir for a directory not to be opened now.
func (r *Receiver) mkdirAll(d string) error {
	f, err := r.makeDir(d)
	if err == nil {
		f.Close()
	}
	return err
}

// forgetDirs empties the directory cache, under r.mu.
func (r *Receiver) forgetDirs() {
	clear(r.dirs)
	clear(r.landed)
}

// made reports whether this receiver created directory d (so that no
// earlier run can have left anything in it).
func (r *Receiver) made(d string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dirs[d]
}

// maxLanded bounds Receiver.landed (8 bytes of key a file): past it the
// directory cache starts again, and Need looks files up as elsewhere.
const maxLanded = 1 << 20

// land records that the file p, in directory d, is in place.
//
// Only on a slow filesystem (landSlow): elsewhere a lookup costs less than
// remembering every new file (a fresh tree of a million files held 17 MiB
// of these in each agent).
func (r *Receiver) land(d, p string) {
	if !landSlow(r) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dirs[d] {
		return
	}
	if len(r.landed) >= maxLanded {
		r.forgetDirs()
		return
	}
	r.landed[xxh3.HashString(p)] = struct{}{}
}

// landSlow says whether the receiver's filesystem is slow enough (more
// than one operation at once) for Need to skip the lookups of files in
// directories it made, and so for land to record what it placed there. A
// file placed while it was not, and offered again once it is, is sent
// again and replaces itself: more work, never a wrong result.
func landSlow(r *Receiver) bool { return r.io.Width() > 1 }

// createInPlace creates the new file p (base in directory dfd) under its
// final name, as tar -x does, rather than as a temporary to be linked into
// place, and returns its descriptor; or -1: the usual way.
//
// Only in a directory this receiver made (empty then, so nothing of the
// user's, or of an earlier run, is there). The temporary's link into place
// was a quarter of the receiver's CPU on 100,000 files of 1 KiB. Until its
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
func (r *Receiver) createInPlace(dfd int, p, base string, perm uint32, spread bool) int {
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
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return -1
	}
	return fd
}

// placed reports whether land recorded the file p.
func (r *Receiver) placed(p string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.landed[xxh3.HashString(p)]
	return ok
}

// tmpTag makes temporary names unique across processes too: the pid alone
// repeats (an agent in a container is often pid 1) and a crashed run's
// leftovers must not collide with a new run's files.
var tmpTag = func() string {
	var b [4]byte
	rand.Read(b[:])
	return strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(b[:])
}()

// tmpSeq numbers temporary names for the whole process: several receivers
// in one process on one root (K agents served in-process) must not pick
// the same name in the same directory.
var tmpSeq atomic.Uint64

func (t *Txn) tmpName() string {
	return TempPrefix + tmpTag + "." + strconv.FormatUint(tmpSeq.Add(1), 36)
}

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
	if e.Kind != sharder.KindFile {
		err := fmt.Errorf("entry %q is a %s, not a file", e.Path, e.Kind)
		t.fail(i, wire.CodeInvalid, err)
		return err
	}
	if e.IsRange() {
		return t.writeRange(i, e, src, x)
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return t.drain(src, want)
	}
	dfd := int(d.Fd())
	tmp, fd := "", -1
	created := time.Now()
	if f := t.r.createInPlace(dfd, e.Path, base, uint32(e.Mode.Perm()), t.spread); f >= 0 {
		fd, tmp = f, base // written under its final name
	}
	if fd < 0 && t.r.linking() != linkNone && tmpfilesOpen.Load() < maxTmpfiles {
		if f, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(e.Mode.Perm())); err == nil {
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
	t.r.io.Since(created)
	discard := func() { t.dropFile(tdir, tmp, fd) }
	// Write time is the receiver's own work: not the time spent waiting
	// for the data to arrive.
	start := time.Now()
	in, tr, h := t.hashed(src)
	defer release(h)
	n, rerr, werr := t.copyData(fd, in, x, e, h)
	t.wrote(start, tr)
	switch {
	case werr != nil:
		discard()
		t.failErr(i, "write", e.Path, werr)
		return t.drain(src, want-n)
	case rerr != nil:
		discard()
		t.fail(i, wire.CodeOther, fmt.Errorf("receive %s: %w", e.Path, rerr))
		return rerr
	case n != want:
		discard()
		err := fmt.Errorf("receive %s: the source shrank while being read: got %d of %d bytes", e.Path, n, want)
		t.fail(i, wire.CodeOther, err)
		return err
	}
	if err := t.setMeta(fd, e, int64(createMode(e.Mode))); err != nil {
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
		start := time.Now()
		err := unix.Fsync(fd)
		t.mu.Lock()
		t.fsyncNanos += int64(time.Since(start))
		t.mu.Unlock()
		if err != nil {
			discard()
			t.failErr(i, "fsync", e.Path, err)
			return nil
		}
	}
	if tmp == "" {
		// An unnamed file keeps its descriptor until Commit links it.
		t.settle(pendingFile{index: i, dir: d, fd: fd, base: base, sum: sumOf(h), summed: h != nil}, e.Size, placeNow)
		return nil
	}
	pf := pendingFile{index: i, dir: d, tmp: tmp, fd: -1, base: base, sum: sumOf(h), summed: h != nil, held: -1}
	if tdir != dfd {
		pf.sdir, pf.held = tdir, t.r.staging.hold(fd)
	}
	if err := unix.Close(fd); err != nil {
		unhold(pf.held)
		unix.Unlinkat(tdir, tmp, 0)
		t.failErr(i, "close", e.Path, err)
		return nil
	}
	t.settle(pf, e.Size, placeNow)
	return nil
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
	t.placing.Go(func() {
		sem <- struct{}{}
		t.place(&p)
		<-sem
		t.addPending(p, size)
	})
}

// placeWidth is how many files WriteThen places at once in one directory:
// one link under its lock while others unlink their staged names.
const placeWidth = 4

// drop abandons the pending file p.
func (t *Txn) drop(p *pendingFile) {
	dfd := int(p.dir.Fd())
	if p.sdir != 0 {
		unhold(p.held)
		p.held, dfd = -1, p.sdir
	}
	t.dropFile(dfd, p.tmp, p.fd)
}

func (t *Txn) addPending(p pendingFile, size int64) {
	p.size = size
	t.mu.Lock()
	t.pending = append(t.pending, p)
	t.mu.Unlock()
}

// hasherPool holds the hashers of files being written (several at once).
var hasherPool = sync.Pool{New: func() any { return xxh3.New128() }}

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
	tr = &waitReader{r: src}
	h = hasherPool.Get().(*xxh3.Hasher128)
	h.Reset()
	return io.TeeReader(tr, h), tr, h
}

func release(h *xxh3.Hasher128) {
	if h != nil {
		hasherPool.Put(h)
	}
}

// wrote counts the time since start, less what tr waited for data, as
// the batch's write time: the receiver's own work.
func (t *Txn) wrote(start time.Time, tr *waitReader) {
	spent := int64(time.Since(start))
	if tr != nil {
		spent -= tr.nanos
	}
	t.mu.Lock()
	t.writeNanos += spent
	t.mu.Unlock()
}

// Unnamed temporary files (O_TMPFILE) are given their name only at commit,
// with linkat: no temporary name to create and then rename away (on tmpfs the
// create and the rename were 40% of the receiver's system time), and nothing
// left behind by a crash. Each holds a descriptor until its batch commits,
// so a process keeps at most maxTmpfiles of them; beyond that, and where the
// filesystem or the privileges do not allow it, files are written under a
// temporary name and renamed.
var (
	tmpfilesOpen atomic.Int64
	maxTmpfiles  = func() int64 {
		var rl unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil {
			return 256
		}
		return int64(min(rl.Cur/4, 1<<16))
	}()
)

// How a descriptor of an unnamed file is linked into a directory.
const (
	linkNone      = iota // no O_TMPFILE: named temporary files
	linkEmptyPath        // linkat(fd, "", AT_EMPTY_PATH): needs CAP_DAC_READ_SEARCH
	linkProc             // linkat("/proc/self/fd/N", AT_SYMLINK_FOLLOW)
)

// probeLink finds how this process can link unnamed files into dir.
func probeLink(dir *os.File) int {
	dfd := int(dir.Fd())
	name := TempPrefix + tmpTag + ".probe"
	for _, mode := range []int{linkEmptyPath, linkProc} {
		fd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return linkNone
		}
		err = linkFD(mode, fd, dfd, name)
		unix.Close(fd)
		if err == nil {
			unix.Unlinkat(dfd, name, 0)
			return mode
		}
	}
	return linkNone
}

func linkFD(mode, fd, dfd int, name string) error {
	if mode == linkEmptyPath {
		return unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH)
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
}

func (r *Receiver) link(fd, dfd int, name string) error { return linkFD(r.linking(), fd, dfd, name) }

// dropFile abandons a written file: closes an unnamed one, removes a named one.
func (t *Txn) dropFile(dfd int, tmp string, fd int) {
	if tmp == "" {
		unix.Close(fd)
		tmpfilesOpen.Add(-1)
		return
	}
	if fd >= 0 {
		unix.Close(fd)
	}
	unix.Unlinkat(dfd, tmp, 0)
}

// copyRangeMin is the smallest file copied with copy_file_range. Below it
// a read and a write are cheaper: on tmpfs and ext4, copy_file_range of a
// small file goes through the kernel's splice machinery (measured: 100,000
// files of 1 KiB took 25% more system time with it).
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
			m, err := unix.CopyFileRange(sfd, nil, fd, nil, int(min(n-written, 1<<30)), 0)
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

// waitReader accounts the time spent waiting for data.
type waitReader struct {
	r     io.Reader
	nanos int64
}

func (w *waitReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := w.r.Read(p)
	w.nanos += int64(time.Since(start))
	return n, err
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		m, err := unix.Write(fd, b)
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

func (t *Txn) mode(m fs.FileMode) fs.FileMode {
	if !t.r.opt.KeepSetid {
		m &^= fs.ModeSetuid | fs.ModeSetgid
	}
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// setMeta applies owner, mode and times through the open descriptor. Owner
// first: chown clears setuid bits.
// created is the mode the file was created with, or -1 if unknown.
func (t *Txn) setMeta(fd int, e *sharder.Entry, created int64) error {
	chowned := false
	if t.r.opt.Owner && (int(e.UID) != euid || int(e.GID) != egid || t.setgidDir.Load()) {
		if err := unix.Fchown(fd, int(e.UID), int(e.GID)); err != nil {
			return err
		}
		chowned = true
	}
	if m := unixmode.Of(t.mode(e.Mode)); chowned || int64(m) != created {
		if err := unix.Fchmod(fd, m); err != nil {
			return err
		}
	}
	return futimens(fd, e.MTime)
}

var (
	euid, egid = os.Geteuid(), os.Getegid()
	umask      = func() uint32 { old := unix.Umask(0); unix.Umask(old); return uint32(old) }()
)

// createMode is the mode a file created with perm(m) gets under the umask:
// when it is already right, no fchmod is needed.
func createMode(m fs.FileMode) uint32 { return uint32(m.Perm()) &^ umask }

// futimens sets a descriptor's mtime, leaving atime alone.
func futimens(fd int, mtime int64) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime)}
	// utimensat(fd, NULL, ts, 0) is futimens(3).
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func (t *Txn) fail(i int, code int, err error) {
	t.mu.Lock()
	t.errs = append(t.errs, wire.EntryError{Index: i, Code: code, Msg: err.Error()})
	t.mu.Unlock()
}

// Withdraw forgets the failures recorded against entry i: its sender
// withdrew it (the source changed while being read), so that it did not
// land is not the receiver's failure.
func (t *Txn) Withdraw(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = slices.DeleteFunc(t.errs, func(e wire.EntryError) bool { return e.Index == i })
}

// failErr records an OS error with the operation and path, classifying it.
func (t *Txn) failErr(i int, op, p string, err error) {
	if errors.Is(err, errInWay) {
		// What to do about it, not what was being done.
		t.fail(i, Code(err), fmt.Errorf("%s: %w", p, err))
		return
	}
	t.fail(i, Code(err), fmt.Errorf("%s %s: %w", op, p, unwrapPath(err)))
}

// unwrapPath strips the *PathError of an error whose path is a temporary
// or relative name the user would not recognise.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Code classifies a receiver-side error for the sender.
func Code(err error) int {
	var nd *notDirError
	switch {
	case errors.As(err, &nd):
		return wire.CodeInvalid
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return wire.CodeNoSpace
	case errors.Is(err, syscall.EROFS):
		return wire.CodeReadOnly
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return wire.CodePerm
	}
	return wire.CodeOther
}

// checkName refuses entry i, recording why, if its name may not be
// written (see CheckName).
func (t *Txn) checkName(i int) error {
	e := &t.entries[i]
	err := CheckName(e.Path, e.Kind)
	if err != nil {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing %q: %v", e.Path, err))
	}
	return err
}

// Apply installs entry i of a final batch: a directory (created, then
// owner, mode and mtime applied), a symlink or a hard link. The sender
// sends symlinks before directories and directories deepest first, so a
// directory's mtime is set after everything inside it.
func (t *Txn) Apply(i int) {
	e := &t.entries[i]
	if t.checkName(i) != nil {
		return
	}
	switch e.Kind {
	case sharder.KindDir:
		t.applyDir(i, e)
	case sharder.KindSymlink:
		t.applySymlink(i, e)
	case sharder.KindHardlink:
		t.applyHardlink(i, e)
	default:
		t.fail(i, wire.CodeInvalid, fmt.Errorf("entry %q: a %s in a final batch", e.Path, e.Kind))
	}
}

// dirInPlace reports whether the directory fd already has e's mode, mtime
// and (when owners are kept) owner: a pass over an unchanged tree then
// writes nothing (on NFS, two round trips less a directory).
func (t *Txn) dirInPlace(fd int, e *sharder.Entry) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&0o7777 != unixmode.Of(t.mode(e.Mode))&0o7777 || st.Mtim.Nano() != e.MTime {
		return false
	}
	return !t.r.opt.Owner || int(st.Uid) == int(e.UID) && int(st.Gid) == int(e.GID)
}

func (t *Txn) applyDir(i int, e *sharder.Entry) {
	if f := t.openDirEntry(i, e); f != nil {
		t.setDirMeta(i, e, f)
		f.Close()
	}
}

// openDirEntry makes directory entry i, e, if it is missing, and opens
// it; nil if either fails (recorded against the entry).
func (t *Txn) openDirEntry(i int, e *sharder.Entry) *os.File {
	seen := t.r.seenDir(e.Path)
	f, err := t.r.makeDir(e.Path)
	if wayBlocked(err) && !seen {
		f, err = t.r.openWay(e.Path) // see inway.go
	}
	if err != nil {
		t.failErr(i, "create directory", e.Path, err)
		return nil
	}
	return f
}

// setDirMeta gives directory entry i, e, open as f, its owner, mode,
// mtime and extended attributes.
func (t *Txn) setDirMeta(i int, e *sharder.Entry, f *os.File) {
	// One this receiver made is not in place (it has the mode and time of
	// its making): no need to look.
	if e.Path != "." && t.r.made(e.Path) || !t.dirInPlace(int(f.Fd()), e) {
		if err := t.setMeta(int(f.Fd()), e, -1); err != nil {
			t.failErr(i, "set metadata of directory", e.Path, err)
			return
		}
	}
	if err := t.setXattrs(int(f.Fd()), -1, "", e, t.xattrsOf(i)); err != nil {
		t.fail(i, Code(err), err)
		return
	}
	if t.r.opt.Fsync {
		f.Sync()
	}
	t.count(1, 0, 0)
}

// CheckLinkTarget validates a symlink target: non-empty, bounded, no NUL.
// Targets are kept verbatim (absolute ones too, as a system copy needs);
// they are harmless to the receiver because it follows no symlink on the
// way to what it writes (see openDir).
func CheckLinkTarget(s string) error {
	if s == "" || len(s) > wire.MaxPath || strings.IndexByte(s, 0) >= 0 {
		return errors.New("invalid symlink target")
	}
	return nil
}

func (t *Txn) applySymlink(i int, e *sharder.Entry) {
	if err := CheckLinkTarget(e.Link); err != nil {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing symlink %q: %v", e.Path, err))
		return
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return
	}
	// Already right: leave it (and its directory's mtime) alone.
	cur, err := readlinkat(int(d.Fd()), base)
	if err == nil && t.r.opt.check() == wire.CheckExisting {
		t.count(0, 0, 1) // --ignore-existing: a symlink there stays as it is
		return
	}
	if err == nil && cur == e.Link {
		t.setLinkMeta(i, d, base, e)
		t.count(0, 0, 1)
		return
	}
	tmp := t.tmpName()
	if err := unix.Symlinkat(e.Link, int(d.Fd()), tmp); err != nil {
		t.failErr(i, "create symlink", e.Path, err)
		return
	}
	if err := t.replace(d, tmp, base, e.Path); err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		t.failErr(i, "create symlink", e.Path, err)
		return
	}
	t.setLinkMeta(i, d, base, e)
	t.count(1, 0, 0)
}

func (t *Txn) setLinkMeta(i int, d *os.File, base string, e *sharder.Entry) {
	if t.r.opt.Owner {
		if err := unix.Fchownat(int(d.Fd()), base, int(e.UID), int(e.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.failErr(i, "chown symlink", e.Path, err)
			return
		}
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(e.MTime)}
	if err := unix.UtimesNanoAt(int(d.Fd()), base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.failErr(i, "set time of symlink", e.Path, err)
	}
	if err := t.setXattrs(-1, int(d.Fd()), base, e, t.xattrsOf(i)); err != nil {
		t.fail(i, Code(err), err)
	}
}

func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, wire.MaxPath+1)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// replace renames tmp over base in directory d, the entry p, clearing a
// directory in the way first as far as the options allow (see clearDir).
func (t *Txn) replace(d *os.File, tmp, base, p string) error {
	return t.r.renameOver(int(d.Fd()), tmp, int(d.Fd()), base, p)
}

func (t *Txn) applyHardlink(i int, e *sharder.Entry) {
	if err := CheckName(e.Link, sharder.KindFile); err != nil {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing hard link %q: target %q: %v", e.Path, e.Link, err))
		return
	}
	if ok, err := t.r.isKnown(e.Link); err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	} else if !ok {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing hard link %q: target %q is not a file this job wrote", e.Path, e.Link))
		return
	}
	// The target and the link each through their directory's descriptor
	// (see openDir), and what was linked checked to be what was looked at.
	ld, lbase, err := t.dir(e.Link)
	if err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	var target unix.Stat_t
	if err := unix.Fstatat(int(ld.Fd()), lbase, &target, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	if target.Mode&unix.S_IFMT != unix.S_IFREG {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing hard link %q: target %q is not a regular file", e.Path, e.Link))
		return
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return
	}
	dfd := int(d.Fd())
	var cur unix.Stat_t
	if err := unix.Fstatat(dfd, base, &cur, unix.AT_SYMLINK_NOFOLLOW); err == nil &&
		(cur.Ino == target.Ino && cur.Dev == target.Dev || t.r.opt.check() == wire.CheckExisting && cur.Mode&unix.S_IFMT == unix.S_IFREG) {
		t.count(0, 0, 1) // (--ignore-existing: any file there stays as it is)
		return
	}
	tmp := t.tmpName()
	if err := unix.Linkat(int(ld.Fd()), lbase, dfd, tmp, 0); err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	var linked unix.Stat_t
	if err := unix.Fstatat(dfd, tmp, &linked, unix.AT_SYMLINK_NOFOLLOW); err != nil || linked.Ino != target.Ino || linked.Dev != target.Dev {
		unix.Unlinkat(dfd, tmp, 0)
		t.fail(i, wire.CodeOther, fmt.Errorf("hard link %s: its target %s was replaced while being linked", e.Path, e.Link))
		return
	}
	if err := t.replace(d, tmp, base, e.Path); err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	t.count(1, 0, 0)
}

// Commit renames the batch's files into place, except those discarded by
// the sender, syncs directories with Fsync, and returns the batch's ack.
func (t *Txn) Commit(id uint64, discards []wire.Discard) *wire.BatchAck {
	return t.CommitSums(id, discards, nil)
}

// CommitSums is Commit, given the sender's hashes of the files it sent: a
// file whose data does not hash to the sender's (corrupted on the way, or
// by a faulty disk or memory) is dropped and fails with CodeCorrupt: it
// never takes its final name, or, written under it (createInPlace), is
// removed.
func (t *Txn) CommitSums(id uint64, discards []wire.Discard, sums []wire.IndexedSum) *wire.BatchAck {
	commitStart := time.Now()
	t.placing.Wait()
	drop := map[int]string{}
	for _, d := range discards {
		drop[d.Index] = d.Reason
	}
	want := make(map[int]wire.Sum, len(sums))
	for _, s := range sums {
		want[s.Index] = s.Sum
	}
	// Linking or renaming into place is one operation per file: on a slow
	// filesystem, many at once.
	ioconc.ForEach(len(t.pending), t.r.io.Width(), func(_, k int) {
		p := &t.pending[k]
		e := &t.entries[p.index]
		if p.settled {
			return // placed by WriteThen
		}
		if p.part != "" {
			// A range of a split file: see partial.go.
			switch s, ok := want[p.index]; {
			case containsKey(drop, p.index):
				t.discardRange(p)
			case ok && p.summed && s != p.sum:
				unix.Close(p.fd)
				t.fail(p.index, wire.CodeCorrupt, fmt.Errorf("receive %s: the range at %d that arrived does not hash to what the sender read (XXH3-128): not recorded", e.Path, e.Off))
			default:
				p.placed = t.commitRange(p)
			}
			p.fd = -1
			return
		}
		if _, ok := drop[p.index]; ok {
			t.drop(p)
			return
		}
		if s, ok := want[p.index]; ok && p.summed && s != p.sum {
			t.drop(p)
			t.fail(p.index, wire.CodeCorrupt, fmt.Errorf("receive %s: the data that arrived does not hash to what the sender read (XXH3-128): not installed", e.Path))
			return
		}
		t.place(p)
	})
	// Bytes count only what landed: a file placed, or a range recorded
	// in its partial; not one that failed or was dropped.
	failed := make(map[int]bool, len(t.errs))
	for _, e := range t.errs {
		failed[e.Index] = true
	}
	for _, p := range t.pending {
		if p.placed {
			t.files++
		}
		if p.placed || p.part != "" && !containsKey(drop, p.index) && !failed[p.index] {
			t.bytes += p.size
		}
	}
	if t.r.opt.Fsync && len(t.pending) > 0 {
		start := time.Now()
		for name, d := range t.dirs {
			if d.f == nil {
				continue
			}
			if err := d.f.Sync(); err != nil {
				// The names are in place but not durable: report each
				// file of that directory, so the sender does not count
				// them as done (an fsync error is never retried).
				for _, p := range t.pending {
					if p.dir == d.f && p.placed {
						t.failErr(p.index, "fsync directory "+name+" of", t.entries[p.index].Path, err)
						t.files--
						t.bytes -= p.size
					}
				}
			}
		}
		t.fsyncNanos += int64(time.Since(start))
	}
	t.close()
	a := &wire.BatchAck{ID: id, Files: t.files, Bytes: t.bytes, Skipped: t.skipped, Errors: t.errs,
		WriteNanos: t.writeNanos + int64(time.Since(commitStart)), FsyncNanos: t.fsyncNanos, LatencyNanos: int64(t.r.io.Latency())}
	t.r.files.Add(t.files)
	t.r.bytes.Add(t.bytes)
	t.r.skipped.Add(t.skipped)
	t.r.errs.Add(int64(len(t.errs)))
	t.r.writeNanos.Add(a.WriteNanos)
	t.r.fsyncNanos.Add(a.FsyncNanos)
	return a
}

// place gives the written file p its final name (its temporary is gone
// afterwards, whatever the outcome) and settles it.
func (t *Txn) place(p *pendingFile) {
	e := &t.entries[p.index]
	dfd := int(p.dir.Fd())
	p.settled = true
	start := time.Now()
	if p.direct() {
		// Under its name since it was written.
	} else if p.tmp == "" {
		err := t.r.link(p.fd, dfd, p.base)
		if err == unix.EEXIST {
			// Replacing a file: link under a temporary name, then rename.
			tmp := t.tmpName()
			if err = t.r.link(p.fd, dfd, tmp); err == nil {
				if err = t.replace(p.dir, tmp, p.base, e.Path); err != nil {
					unix.Unlinkat(dfd, tmp, 0)
				}
			}
		}
		t.dropFile(dfd, "", p.fd)
		p.fd = -1
		if err != nil {
			t.failErr(p.index, "link into place", e.Path, err)
			return
		}
	} else if p.sdir != 0 {
		over := func(fdir int, from string, dfd int, base string) error {
			return t.r.renameOver(fdir, from, dfd, base, e.Path)
		}
		if err := t.r.staging.placeStaged(p, dfd, over); err != nil {
			t.failErr(p.index, "link into place", e.Path, err)
			return
		}
	} else if err := t.replace(p.dir, p.tmp, p.base, e.Path); err != nil {
		unix.Unlinkat(dfd, p.tmp, 0)
		t.failErr(p.index, "rename into place", e.Path, err)
		return
	}
	if !p.direct() { // (nothing done: no latency to tell)
		t.r.io.Since(start)
	}
	p.placed = true
	t.r.land(path.Dir(e.Path), e.Path)
	if e.Nlink > 1 {
		t.r.remember(e.Path)
	}
}

// Abort removes the batch's temporary files.
func (t *Txn) Abort() {
	t.placing.Wait()
	for k := range t.pending {
		p := &t.pending[k]
		if p.settled {
			continue // in place already (WriteThen)
		}
		if p.part != "" {
			// What was written stays in the partial, unrecorded: the
			// range goes again.
			unix.Close(p.fd)
			continue
		}
		t.drop(p)
	}
	t.pending = nil
	t.close()
}

func (t *Txn) close() {
	for _, d := range t.dirs {
		if d.f != nil {
			d.f.Close()
		}
	}
	clear(t.dirs)
}
