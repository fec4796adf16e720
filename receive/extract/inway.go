package extract

// What is in the way of an entry at the destination: a source whose entry
// changed type (a directory that became a file, a file that became a
// directory, a symlink in place of either) must converge in one pass, as
// rsync -a --delete does.
//
// In the way of a file or a symlink: a file, a symlink or an empty
// directory is replaced; a non-empty directory is removed, with all it
// holds, only with --delete (Options.Delete), else the entry fails with a
// message that says so.
//
// In the way of a directory (the entry's own, or a parent of it): a file
// is replaced by the directory. A symlink is never followed, and replaced
// only with --delete: without it, it cannot be told from a directory of
// DEST that a local user swapped for a symlink while the pass runs, which
// must fail (see openDir), and the entry fails saying both. Neither is
// replaced where this receiver opened that directory earlier in the run,
// or with --delete found it a directory in a quick check (seenDir):
// whatever is there now was swapped in.
//
// Everything is done by name in an open directory descriptor, never by a
// path looked up again.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errInWay is the cause of a failure to replace a non-empty directory
// without --delete.
var errInWay = errors.New("a non-empty directory is in the way")

// isDirInWay reports whether err, from a rename of a non-directory to a
// name, says a directory holds that name.
func isDirInWay(err error) bool {
	return err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST
}

// clearDir removes the directory base in dfd, which is in the way of the
// non-directory p (a file or a symlink, named from in fdir, about to be
// renamed over it): at once if it is empty; with all it holds only with
// --delete, else it fails with errInWay. nil: base is free, or no longer a
// directory (the rename replaces whatever it now is).
func (r *Receiver) clearDir(dfd int, base, p string, fdir int, from string, a *aside) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	r.forget(p)
	err := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.ENOTEMPTY && err != unix.EEXIST {
		return err
	}
	if !r.opt.Delete {
		what := "file"
		if unix.Fstatat(fdir, from, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
			case unix.S_IFLNK:
				what = "symlink"
			default:
				what = "device or special file"
			}
		}
		return fmt.Errorf("%w of a %s; rerun with --delete to replace it", errInWay, what)
	}
	if r.backingUp() {
		gone, err := r.backupTree(dfd, base, p, a)
		if err == nil && !gone {
			err = fmt.Errorf("%w, and its files were backed up beside them (--backup without --backup-dir), so it stays", errInWay)
		}
		return err
	}
	return removeAllAt(dfd, base)
}

// forget drops the directory p and those beneath it from the directory
// cache: they are being removed.
func (r *Receiver) forget(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range r.dirs {
		if d == p || strings.HasPrefix(d, p+"/") {
			delete(r.dirs, d)
		}
	}
	for d := range r.looked {
		if d == p || strings.HasPrefix(d, p+"/") {
			delete(r.looked, d)
		}
	}
}

// seenDir reports whether this receiver opened d as a directory earlier
// in this run, to write in it or below it (makeDir records it) or, with
// --delete, to look at what it holds (lookedAt), as far as its caches
// remember: if something else is there now, it was swapped in meanwhile.
func (r *Receiver) seenDir(d string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.dirs[d]
	if !ok {
		_, ok = r.looked[d]
	}
	return ok
}

// lookedAt records that a quick check opened d, and so its parents, as
// directories. Only with --delete: without it a symlink in the way of a
// directory is never replaced, whether seen before or not.
func (r *Receiver) lookedAt(d string) {
	if !r.opt.Delete {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.looked == nil || len(r.looked) > 1<<16 {
		r.looked = map[string]struct{}{}
	}
	// Whoever recorded one recorded its parents too.
	for p := d; p != "" && p != "."; p = parentOf(p) {
		if _, ok := r.looked[p]; ok {
			break
		}
		r.looked[p] = struct{}{}
	}
}

// typeChanged reports whether err, from opening the directory d to prune
// it, met something else in the way that the directory replaces later in
// the pass (an empty directory of SRC is made after the prune): with
// --delete, where this receiver did not open that directory (d, or the
// parent of it where err met it) earlier in the run. A prune there has
// nothing to remove.
func (r *Receiver) typeChanged(d string, err error) bool {
	var iw *inWayError
	if !errors.As(err, &iw) || !r.opt.Delete {
		return false
	}
	if iw.at != "" {
		d = iw.at
	}
	return !r.seenDir(d)
}

// renameOver renames from (in fdir) to base in dfd, the entry p, clearing
// a directory in the way first (see clearDir). With --backup, what it
// replaces is moved aside first (see backup.go), noted in a.
func (r *Receiver) renameOver(fdir int, from string, dfd int, base, p string, a *aside) error {
	if r.backingUp() {
		if _, err := r.backupAt(dfd, base, p, true, a); err != nil {
			return err
		}
	}
	err := unix.Renameat(fdir, from, dfd, base)
	if !isDirInWay(err) {
		return err
	}
	if err := r.clearDir(dfd, base, p, fdir, from, a); err != nil {
		return err
	}
	return unix.Renameat(fdir, from, dfd, base)
}

// wayBlocked reports whether err, from making or opening a directory,
// says something else is in the way: a non-directory where the directory
// or a parent of it should be, or a symlink (which is not followed).
func wayBlocked(err error) bool {
	return errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// openWay opens directory d beneath the root one component at a time,
// never following a symlink, and makes each component a directory: one
// that is missing is made, and one that is something else is replaced by
// a new one as far as the rules above allow. The slow way, for when
// makeDir failed on something in the way.
func (r *Receiver) openWay(d string, a *aside) (*os.File, error) {
	fd, err := unix.Openat(int(r.rootDir.Fd()), ".", dirFlags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: r.dir, Err: err}
	}
	if d == "." {
		return os.NewFile(uintptr(fd), d), nil
	}
	comps := strings.Split(d, "/")
	for k, c := range comps {
		p := strings.Join(comps[:k+1], "/")
		nfd, made, err := r.openWayAt(fd, c, p, a)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.dirs[p] = r.dirs[p] || made
		r.mu.Unlock()
		fd = nfd
	}
	return os.NewFile(uintptr(fd), d), nil
}

// openWayAt opens the directory name in dfd (p under the root), never
// through a symlink, first making it, in place of what is there if that
// may be replaced (see above).
func (r *Receiver) openWayAt(dfd int, name, p string, a *aside) (fd int, made bool, err error) {
	// A few rounds: another writer may be making the same directory.
	for range 3 {
		fd, err := unix.Openat(dfd, name, dirFlags, 0)
		if err == nil {
			return fd, made, nil
		}
		var st unix.Stat_t
		switch serr := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
		case serr == unix.ENOENT:
		case serr != nil:
			return -1, false, &fs.PathError{Op: "open", Path: p, Err: serr}
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			if err == unix.ELOOP || err == unix.ENOTDIR {
				continue // a directory again: swapped back meanwhile
			}
			return -1, false, &fs.PathError{Op: "open", Path: p, Err: err} // a directory that cannot be opened
		default:
			nd := &notDirError{Path: filepath.Join(r.dir, p), Is: "not a directory"}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				nd.Is = "a symlink"
			}
			if r.seenDir(p) {
				return -1, false, nd // swapped in during the run
			}
			if nd.Is == "a symlink" && !r.opt.Delete {
				return -1, false, fmt.Errorf("%w; if SRC has a directory there, rerun with --delete to replace it", nd)
			}
			if r.backingUp() {
				if _, err := r.backupAt(dfd, name, p, false, a); err != nil {
					return -1, false, err
				}
			}
			// Without AT_REMOVEDIR unlinkat never removes a directory,
			// whatever took the name meanwhile.
			if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
				return -1, false, fmt.Errorf("%s: replace what is in the way of a directory: %w", filepath.Join(r.dir, p), err)
			}
		}
		// Owner-writable while the job runs, as makeDir makes them.
		if err := unix.Mkdirat(dfd, name, 0o700); err == nil {
			made = true
		} else if err != unix.EEXIST {
			return -1, false, &fs.PathError{Op: "mkdir", Path: p, Err: err}
		}
	}
	return -1, false, &notDirError{Path: filepath.Join(r.dir, p), Is: "swapped while being opened"}
}

// removeAllAt removes name in the directory dfd and, if it is a directory,
// everything beneath it, never following a symlink: a symlink is removed
// as a link, a directory is opened with O_NOFOLLOW and emptied through
// its own descriptor. A directory swapped for a symlink meanwhile fails
// to open (nothing is removed through it).
func removeAllAt(dfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		// Without AT_REMOVEDIR unlinkat never removes a directory,
		// whatever took the name meanwhile.
		if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
			return err
		}
		return nil
	}
	for range 3 {
		fd, err := unix.Openat(dfd, name, dirFlags, 0)
		if err != nil {
			if err == unix.ENOENT {
				return nil
			}
			return err
		}
		err = emptyDir(fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.ENOTEMPTY && err != unix.EEXIST {
			return err
		}
		// Something was added meanwhile: again.
	}
	return unix.ENOTEMPTY
}

// emptyDir removes everything in the directory open as fd.
func emptyDir(fd int) error {
	// Its own descriptor to read from: os.File closes what it holds.
	rfd, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(rfd), "")
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024) // a huge directory in chunks
		for _, n := range names {
			if rerr := removeAllAt(fd, n); rerr != nil {
				return rerr
			}
		}
		if err == io.EOF || len(names) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
