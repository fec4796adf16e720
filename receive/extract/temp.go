package extract

// Temporary files: a file is written under a temporary and gets its
// final name only at commit, so that a final name never holds a partial
// file. Here: how temporaries are named (TempPrefix, this process's
// tmpTag), how an unnamed one (O_TMPFILE) is linked into place (probeLink,
// linking), how a written one is dropped, and how the leftovers of
// interrupted runs are swept (sweep).

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// TempPrefix starts the name of every temporary file the receiver creates,
// so that leftovers of an interrupted run can be recognised and removed.
const TempPrefix = ".bulkmove.tmp."

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

func (t *Txn) tmpName() string { return tmpName() }

func tmpName() string {
	return TempPrefix + tmpTag + "." + strconv.FormatUint(tmpSeq.Add(1), 36)
}

// Unnamed temporary files (O_TMPFILE) are given their name only at commit,
// with linkat: no temporary name to create and then rename away (two
// operations a file, much of the receiver's system time where files are
// small), and nothing left behind by a crash. Each holds a descriptor until its batch commits,
// so a process keeps at most maxTmpfiles of them (with the files written
// under their final names that hold theirs: holdDirect); beyond that, and where the
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
		fd, err := unix.Openat(dfd, ".", oTmpfile|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
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
		return unix.Linkat(fd, "", dfd, name, atEmptyPath)
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
}

func (r *Receiver) link(fd, dfd int, name string) error { return linkFD(r.linking(), fd, dfd, name) }

// unlinkIno removes name from the directory dfd if it is still the file
// of inode ino: a file written under its final name (see createInPlace)
// that is given up. Its name may hold another file by then: a second run
// that found the half-written file and put its own copy in its place (its
// sender gone, this receiver may still be winding down), or the user's.
// That one stays.
func unlinkIno(dfd int, name string, ino uint64) {
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == ino {
		unix.Unlinkat(dfd, name, 0)
	}
}

// holdDirect says whether a file written under its final name keeps its
// descriptor until its batch settles (pendingFile.fd), counted against
// maxTmpfiles, rather than being asked for its inode at once: on a local
// filesystem, whose close reports no write error to act on at commit
// (NFS's does: there it is closed, and checked, once written).
func holdDirect(r *Receiver) bool {
	if landSlow(r) || tmpfilesOpen.Load() >= maxTmpfiles {
		return false
	}
	tmpfilesOpen.Add(1)
	return true
}

// closeHeld closes the descriptor p holds for holdDirect, if any.
func closeHeld(p *pendingFile) error {
	if p.fd < 0 {
		return nil
	}
	err := p.sys.Close(p.fd)
	p.fd = -1
	tmpfilesOpen.Add(-1)
	return err
}

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
