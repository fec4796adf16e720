package extract

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// Staging: on a filesystem without O_TMPFILE (NFS, FUSE) a file is written
// under a temporary name and then renamed into place. Creating a name and
// renaming hold the directory's lock for a server round trip each (and the
// kernel looks each name up first), so a directory of many new files took
// five round trips a file under its lock, against two for `tar -x`, and
// those locks, not the server, set the pace. On such a filesystem, when it
// is slow, temporaries are written instead in staging directories of the
// receiver's own (.bulkmove.tmp.TAG.stage/N, one taken in turn for each
// file), then hard-linked into place (a lookup and a link under the target
// directory's lock, as tar's create) and unlinked from the staging
// directory. A file that replaces another is renamed over it from there.
// Nothing ever stands half-written under its final name.
//
// The link is made from a descriptor of the staged file (an O_PATH one,
// taken through /proc once the file is written and closed) where the
// kernel allows it: linking by name had the kernel look the staged name up
// again first, one more round trip a file.
//
// Staging is not used for a directory on another filesystem than the
// staging directory (a mount point inside DEST), one that is setgid or has
// a default ACL (a file created elsewhere would not get its group or ACL).

// stageDirs is how many staging directories a receiver writes into. Each
// file holds its staging directory's lock for three round trips (a lookup
// and a create, then a lookup and an unlink once linked into place), its
// target directory's for one: with 16 the links into the targets are the
// limit, and more cost more than they give (removing them, an rmdir each
// under one lock, is on the end of the job's path).
const stageDirs = 16

// stage is a receiver's staging directories: the top one and the first
// below it made at the first file that needs them, the others one after
// the other by a goroutine of their own, each used as soon as it exists
// (made in line, one after the other under the top one's lock, they
// held up the first files by a round trip each).
type stage struct {
	once sync.Once
	top  *os.File // nil: no staging
	name string   // top's name under the root
	dev  uint64
	dirs [stageDirs]*os.File
	made atomic.Int32 // dirs[:made] are open
	next atomic.Uint64
	stop atomic.Bool    // no more directories
	grew sync.WaitGroup // the goroutine making them
	// fdLink is how a staged file is linked from its held descriptor:
	// linkEmptyPath or linkProc once a link showed which the kernel
	// allows, noFDLink if neither (then by name), 0 while unknown.
	fdLink atomic.Int32

	mu sync.Mutex
	ok map[string]bool // target directories: may files be staged for them
}

// stageFor returns the staging directory for the next file of the target
// directory d (named dir under the root), or nil to write the file in d.
func (r *Receiver) stageFor(dir string, d *os.File) *os.File {
	if r.linking() != linkNone || r.io.Width() <= 1 {
		return nil
	}
	s := &r.staging
	s.once.Do(r.makeStage)
	if s.top == nil {
		return nil
	}
	s.mu.Lock()
	ok, known := s.ok[dir]
	s.mu.Unlock()
	if !known {
		ok = s.eligible(d)
		s.mu.Lock()
		if len(s.ok) > 1<<16 {
			clear(s.ok)
		}
		s.ok[dir] = ok
		s.mu.Unlock()
	}
	if !ok {
		return nil
	}
	return s.dirs[s.next.Add(1)%uint64(s.made.Load())]
}

// eligible reports whether files of the target directory d may be staged.
func (s *stage) eligible(d *os.File) bool {
	var st unix.Stat_t
	if unix.Fstat(int(d.Fd()), &st) != nil || uint64(st.Dev) != s.dev || st.Mode&unix.S_ISGID != 0 {
		return false
	}
	_, err := unix.Fgetxattr(int(d.Fd()), "system.posix_acl_default", nil)
	return err != nil // no default ACL (ENODATA), or none possible
}

// makeStage creates the top staging directory and the first below it,
// first removing those that interrupted runs left behind, and starts
// making the others; on any failure there is no staging.
func (r *Receiver) makeStage() {
	s := &r.staging
	s.ok = map[string]bool{}
	r.sweepStages()
	// Its own name: receivers of one process (an agent serving several
	// streams) share tmpTag, and all but the first found it taken.
	s.name = TempPrefix + tmpTag + "." + strconv.FormatUint(tmpSeq.Add(1), 36) + ".stage"
	rfd := int(r.rootDir.Fd())
	if err := unix.Mkdirat(rfd, s.name, 0o700); err != nil {
		return
	}
	fd, err := unix.Openat(rfd, s.name, dirFlags, 0)
	if err != nil {
		unix.Unlinkat(rfd, s.name, unix.AT_REMOVEDIR)
		return
	}
	f := os.NewFile(uintptr(fd), s.name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		unix.Unlinkat(rfd, s.name, unix.AT_REMOVEDIR)
		return
	}
	s.top, s.dev = f, uint64(st.Dev)
	if s.dirs[0] = s.makeDir(0); s.dirs[0] == nil {
		s.top = nil
		f.Close()
		unix.Unlinkat(rfd, s.name, unix.AT_REMOVEDIR)
		return
	}
	s.made.Store(1)
	s.grew.Go(func() {
		for k := 1; k < stageDirs && !s.stop.Load(); k++ {
			if s.dirs[k] = s.makeDir(k); s.dirs[k] == nil {
				return
			}
			s.made.Store(int32(k + 1))
		}
	})
}

// makeDir makes and opens staging directory k, or returns nil.
func (s *stage) makeDir(k int) *os.File {
	name := strconv.Itoa(k)
	tfd := int(s.top.Fd())
	if err := unix.Mkdirat(tfd, name, 0o700); err != nil {
		return nil
	}
	fd, err := unix.Openat(tfd, name, dirFlags, 0)
	if err != nil {
		unix.Unlinkat(tfd, name, unix.AT_REMOVEDIR)
		return nil
	}
	return os.NewFile(uintptr(fd), name)
}

// closeStage removes the staging directories (empty once every batch is
// committed or aborted).
func (r *Receiver) closeStage() {
	s := &r.staging
	s.once.Do(func() {}) // none made from now on
	if s.top == nil {
		return
	}
	// Removing it changes the root's times, which a final batch may have
	// set already (another receiver's, on the same root): put them back.
	var st unix.Stat_t
	rfd := int(r.rootDir.Fd())
	err := unix.Fstat(rfd, &st)
	// Each (empty) directory with one rmdir, many at once on a slow
	// filesystem; whatever is left, the slow way.
	s.stop.Store(true)
	s.grew.Wait()
	tfd := int(s.top.Fd())
	ioconc.ForEach(int(s.made.Load()), r.io.Width(), func(_, k int) {
		s.dirs[k].Close()
		unix.Unlinkat(tfd, strconv.Itoa(k), unix.AT_REMOVEDIR)
	})
	if err := unix.Unlinkat(rfd, s.name, unix.AT_REMOVEDIR); err != nil {
		if err := removeOpened(rfd, s.top, s.name); err != nil {
			// Names left in it are the sender's: escaped.
			fmt.Fprintf(os.Stderr, "bulkmove: removing the staging directory %s: %s\n", termsafe.Escape(s.name), termsafe.Escape(err.Error()))
		}
	}
	s.top.Close()
	s.top = nil
	if err == nil {
		dirat.SetMtime(rfd, st.Mtim.Nano())
	}
}

// sweepStages removes the staging directories of other runs untouched for
// staleTemp: those of interrupted runs.
func (r *Receiver) sweepStages() {
	f, err := r.openDir(".", 0)
	if err != nil {
		return
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if !strings.HasPrefix(n, TempPrefix) || !strings.HasSuffix(n, ".stage") {
				continue
			}
			if d := r.staleStage(n); d != nil {
				if staleStageFound != nil {
					staleStageFound(n)
				}
				removeOpened(int(f.Fd()), d, n)
				d.Close()
			}
		}
		if err != nil || len(names) == 0 {
			return
		}
	}
}

// staleStageFound, if set, is called with the name of a staging directory
// found stale, before it is removed (a test swaps another directory in).
var staleStageFound func(name string)

// removeOpened removes the directory open as d, named name in the
// directory dfd: emptied through d (see emptyDir), never through its
// name, which a local user may have given to another directory meanwhile;
// then its name, if it still names d.
func removeOpened(dfd int, d *os.File, name string) error {
	if err := emptyDir(int(d.Fd())); err != nil {
		return err
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &a); err != nil {
		return err
	}
	switch err := unix.Fstatat(dfd, name, &b, unix.AT_SYMLINK_NOFOLLOW); {
	case err == unix.ENOENT:
		return nil // its name is gone already
	case err != nil:
		return err
	case a.Dev != b.Dev || a.Ino != b.Ino:
		return fmt.Errorf("%s: replaced while being removed; left as it is", name)
	}
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != unix.ENOENT {
		return err
	}
	return nil
}

// staleStage returns the staging directory n (another receiver's), open,
// if it is an interrupted run's: neither it nor any directory in it
// changed for staleTemp; else nil. Its own time alone says nothing: it
// changes only while the directories in it are made, at the start of a
// job that may run for hours, and files are written in those.
func (r *Receiver) staleStage(n string) *os.File {
	f, err := r.openDir(n, unix.O_NOFOLLOW)
	if err != nil {
		return nil
	}
	if !staleDir(f) {
		f.Close()
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil
	}
	return f
}

// staleDir reports whether the directory f and those in it are older
// than staleTemp.
func staleDir(f *os.File) bool {
	// By mtime: a directory's changes with every name made or removed in it,
	// and the receiver never sets a staging directory's times.
	old := func(st *unix.Stat_t) bool { return time.Since(time.Unix(st.Mtim.Unix())) > staleTemp }
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || !old(&st) {
		return false
	}
	for {
		names, err := f.Readdirnames(256)
		for _, sub := range names {
			if unix.Fstatat(int(f.Fd()), sub, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && !old(&st) {
				return false
			}
		}
		if err != nil || len(names) == 0 {
			return true
		}
	}
}

// hold returns an O_PATH descriptor of the staged file open as fd, to link
// it from at commit, or -1 (link it by name): taken through /proc, it
// costs no lookup, and it keeps no file open for writing, so that the
// close that follows still reports a failed write-back before the file
// gets its name. Descriptors held count against maxTmpfiles.
func (s *stage) hold(fd int) int {
	if s.fdLink.Load() == noFDLink || tmpfilesOpen.Load() >= maxTmpfiles {
		return -1
	}
	p, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), oPath|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	tmpfilesOpen.Add(1)
	return p
}

// unhold closes a descriptor taken by hold.
func unhold(fd int) {
	if fd >= 0 {
		unix.Close(fd)
		tmpfilesOpen.Add(-1)
	}
}

// errNoFDLink: the kernel links no file from its descriptor here.
var errNoFDLink = errors.New("no link from a descriptor")

// noFDLink is stage.fdLink when errNoFDLink.
const noFDLink = -1

// linkHeld links the file held by the O_PATH descriptor fd as name in dfd,
// the first time trying each way the kernel may allow.
func (s *stage) linkHeld(fd, dfd int, name string) error {
	if m := s.fdLink.Load(); m != 0 {
		if m == noFDLink {
			return errNoFDLink
		}
		return linkFD(int(m), fd, dfd, name)
	}
	for _, m := range []int{linkEmptyPath, linkProc} {
		err := linkFD(m, fd, dfd, name)
		switch err {
		case nil:
			s.fdLink.Store(int32(m))
			return nil
		case unix.ENOENT, unix.EPERM, unix.EINVAL, unix.EOPNOTSUPP, unix.ENOSYS:
			// not allowed this way (AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH)
		default:
			return err // this file's own trouble (EEXIST: a file is there)
		}
	}
	s.fdLink.Store(noFDLink)
	return errNoFDLink
}

// placeStaged gives the staged file p (named p.tmp in the staging
// directory p.sdir) its name p.base in directory dfd: a hard link where
// base is free, else (a file is there, or the filesystem makes no hard
// links) a rename over what is there by rename (Receiver.renameOver,
// which decides what may become of a directory in the way). The staged
// name is gone afterwards, whatever the outcome.
func (s *stage) placeStaged(p *pendingFile, dfd int, rename func(fdir int, from string, dfd int, base string) error) error {
	err := errNoFDLink
	if p.held >= 0 {
		err = s.linkHeld(p.held, dfd, p.base)
		unhold(p.held)
		p.held = -1
	}
	if err == errNoFDLink {
		err = unix.Linkat(p.sdir, p.tmp, dfd, p.base, 0)
	}
	if err == nil {
		unix.Unlinkat(p.sdir, p.tmp, 0)
		return nil
	}
	if err = rename(p.sdir, p.tmp, dfd, p.base); err == nil {
		return nil
	}
	unix.Unlinkat(p.sdir, p.tmp, 0)
	return err
}
