package extract

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
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
// Staging is not used for a directory on another filesystem than the
// staging directory (a mount point inside DEST), one that is setgid or has
// a default ACL (a file created elsewhere would not get its group or ACL).

// stageDirs is how many staging directories a receiver writes into.
const stageDirs = 16

// stage is a receiver's staging directories, made at the first file that
// needs them.
type stage struct {
	once sync.Once
	top  string     // its name under the root
	dirs []*os.File // nil: no staging
	dev  uint64
	next atomic.Uint64

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
	if s.dirs == nil {
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
	return s.dirs[s.next.Add(1)%uint64(len(s.dirs))]
}

// eligible reports whether files of the target directory d may be staged.
func (s *stage) eligible(d *os.File) bool {
	var st unix.Stat_t
	if unix.Fstat(int(d.Fd()), &st) != nil || st.Dev != s.dev || st.Mode&unix.S_ISGID != 0 {
		return false
	}
	_, err := unix.Fgetxattr(int(d.Fd()), "system.posix_acl_default", nil)
	return err != nil // no default ACL (ENODATA), or none possible
}

// makeStage creates the staging directories, first removing those that
// interrupted runs left behind; on any failure there is no staging.
func (r *Receiver) makeStage() {
	s := &r.staging
	s.ok = map[string]bool{}
	r.sweepStages()
	s.top = TempPrefix + tmpTag + ".stage"
	if err := r.root.Mkdir(s.top, 0o700); err != nil {
		return
	}
	var dirs []*os.File
	for k := range stageDirs {
		name := s.top + "/" + strconv.Itoa(k)
		if err := r.root.Mkdir(name, 0o700); err != nil {
			break
		}
		f, err := r.root.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			break
		}
		dirs = append(dirs, f)
	}
	var st unix.Stat_t
	if len(dirs) < stageDirs || unix.Fstat(int(dirs[0].Fd()), &st) != nil {
		for _, f := range dirs {
			f.Close()
		}
		r.root.RemoveAll(s.top)
		return
	}
	s.dirs, s.dev = dirs, st.Dev
}

// closeStage removes the staging directories (empty once every batch is
// committed or aborted).
func (r *Receiver) closeStage() {
	s := &r.staging
	s.once.Do(func() {}) // none made from now on
	if s.dirs == nil {
		return
	}
	for _, f := range s.dirs {
		f.Close()
	}
	s.dirs = nil
	// Removing it changes the root's times, which a final batch may have
	// set already (another receiver's, on the same root): put them back.
	var st unix.Stat_t
	root, err := r.root.Open(".")
	if err == nil {
		defer root.Close()
		err = unix.Fstat(int(root.Fd()), &st)
	}
	if err := r.root.RemoveAll(s.top); err != nil {
		fmt.Fprintf(os.Stderr, "bulkmove: removing the staging directory %s: %v\n", s.top, err)
	}
	if err == nil {
		futimens(int(root.Fd()), st.Mtim.Nano())
	}
}

// sweepStages removes the staging directories of other runs untouched for
// staleTemp: those of interrupted runs.
func (r *Receiver) sweepStages() {
	f, err := r.root.Open(".")
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
			if fi, err := r.root.Lstat(n); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > staleTemp {
				r.root.RemoveAll(n)
			}
		}
		if err != nil || len(names) == 0 {
			return
		}
	}
}

// placeStaged gives the staged file tmp (in the staging directory sfd) its
// name base in directory dfd: a hard link where base is free, else a
// rename over what is there (never over a directory).
func placeStaged(sfd int, tmp string, dfd int, base string) error {
	err := unix.Linkat(sfd, tmp, dfd, base, 0)
	if err == nil {
		unix.Unlinkat(sfd, tmp, 0)
		return nil
	}
	err = unix.Renameat(sfd, tmp, dfd, base)
	if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
		return fmt.Errorf("a directory is in the way")
	}
	return err
}
