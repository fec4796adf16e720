package engine

// --remove-source-files: the sending side removes each name of SRC once
// DEST holds it durably. The receiver, told so (ReceiveOptions.Fsync and
// SyncInPlace), fsyncs every file of a batch, written or found up to
// date, and its directory before it acknowledges the batch; an entry the
// ack does not name as failed (a corrupted one fails: the end-to-end
// hash) is at DEST. Only then is the source name looked up again, through
// its parent directory's descriptor opened without following a symlink
// anywhere under SRC, and removed if it is still the inode the walk saw,
// unchanged (size, mtime, ctime): a file written since stays, with a
// warning. A killed sender or receiver leaves every file at SRC, at DEST
// or at both, never at neither. A pull's send-hub runs this on SRC's host
// (the Config travels whole). Directories stay; --remove-source-dirs
// removes those left empty once the pass is over.

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/wire"
)

// checkRemoveSource validates --remove-source-files and
// --remove-source-dirs; the first makes every batch durable before its
// ack (--fsync).
func (c *Config) checkRemoveSource() error {
	if c.RemoveSourceDirs && !c.RemoveSourceFiles {
		return errors.New("--remove-source-dirs goes with --remove-source-files")
	}
	if c.RemoveSourceFiles {
		c.Fsync = true
	}
	return nil
}

// srcRemover removes the source names of acknowledged entries. Its
// methods are called one at a time (the pool serialises its results).
type srcRemover struct {
	root   string // SRC's directory, which entry paths are relative to
	file   string // a single-file SRC: the one name every entry stands for
	stderr io.Writer
	// inPlace: a file the receiver found up to date (not sent) is at DEST
	// as sent ones are, as its check says (size and mtime, size alone, or
	// the content hash), as rsync has it; not with --ignore-existing,
	// where anything of that name will do (rsync keeps those too), nor
	// with -u or --existing, which leave out files found newer or not
	// there: then only the files sent go, no symlink or hard link.
	inPlace bool
	// parts sums, per split file, the lengths of its ranges acknowledged:
	// it goes once all of them are.
	parts map[string]int64
	// relinked holds, per inode of several names, its ctime after this
	// job removed one of them (which changes it).
	relinked map[[2]uint64]int64
	// dirs are SRC's directories the pass went through, for
	// --remove-source-dirs.
	dirs []string
	// dir caches the descriptor of the last parent directory opened.
	dirName string
	dirFd   int

	removed, kept int64
	// onRemove, if set, is called before each removal (tests: what is
	// removed when).
	onRemove func(name string)
}

// testRemoveHook, if set, becomes each remover's onRemove.
var testRemoveHook func(name string)

func (j *job) newRemover(p plan) *srcRemover {
	mode, _ := j.flags.checkMode()
	r := &srcRemover{root: p.src.Root, file: p.src.File, stderr: j.stderr, dirFd: -1,
		inPlace:  mode != wire.CheckExisting && !j.flags.Select.keepsFound(),
		parts:    map[string]int64{},
		relinked: map[[2]uint64]int64{},
		onRemove: testRemoveHook,
	}
	return r
}

// done removes the source names of the entries of r that landed.
func (s *srcRemover) done(r send.Result) {
	if r.Ack == nil {
		return
	}
	bad := r.Failed()
	for i := range r.Batch.Entries {
		e := &r.Batch.Entries[i]
		if bad[i] {
			continue
		}
		if e.Kind == model.KindDir {
			if s.file == "" {
				s.dirs = append(s.dirs, e.Path)
			}
			continue
		}
		if !s.inPlace && (r.Final || r.Need != nil && i < len(r.Need) && !r.Need[i]) {
			// (A final batch's ack does not say which of its entries
			// --ignore-existing left as they were.)
			continue
		}
		if e.IsRange() {
			s.parts[e.Path] += e.Len
			if s.parts[e.Path] < e.Size {
				continue
			}
			delete(s.parts, e.Path)
		}
		s.remove(e)
	}
}

// remove removes e's name at SRC if it is still what the walk saw.
func (s *srcRemover) remove(e *model.Entry) {
	full, dfd, base, err := s.parent(e)
	if err == nil {
		err = s.unlink(e, dfd, base)
	}
	switch {
	case err == nil:
		s.removed++
	case errors.Is(err, unix.ENOENT):
		// Gone already (removed by a batch sent twice, or by someone
		// else): nothing left to do.
	default:
		s.kept++
		termsafe.Errorf(s.stderr, "warning: %s not removed from the source: %v", full, err)
	}
}

// errChanged: the name at SRC is not what was sent.
var errChanged = errors.New("changed since it was read")

// unlink removes base in the directory dfd if it is e's inode, unchanged.
func (s *srcRemover) unlink(e *model.Entry, dfd int, base string) error {
	var st unix.Stat_t
	fd, err := unix.Openat(dfd, base, oPathFlag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := s.same(e, &st); err != nil {
		return err
	}
	if s.onRemove != nil {
		s.onRemove(e.Path)
	}
	if err := unix.Unlinkat(dfd, base, 0); err != nil {
		return err
	}
	if st.Nlink > 1 && unix.Fstat(fd, &st) == nil {
		// The inode's other names, removed later, find it changed by
		// this removal alone.
		s.relinked[[2]uint64{uint64(st.Dev), st.Ino}] = st.Ctim.Nano()
	}
	return nil
}

// same reports whether st is e as the walk saw it.
func (s *srcRemover) same(e *model.Entry, st *unix.Stat_t) error {
	typ := uint32(st.Mode) & unix.S_IFMT
	want := map[model.Kind]uint32{model.KindFile: unix.S_IFREG, model.KindHardlink: unix.S_IFREG, model.KindSymlink: unix.S_IFLNK,
		model.KindCharDevice: unix.S_IFCHR, model.KindBlockDevice: unix.S_IFBLK, model.KindFIFO: unix.S_IFIFO, model.KindSocket: unix.S_IFSOCK}[e.Kind]
	if typ != want || uint64(st.Dev) != e.Dev || st.Ino != e.Ino {
		return fmt.Errorf("%w: another file has its name", errChanged)
	}
	ctime := st.Ctim.Nano()
	if c, ok := s.relinked[[2]uint64{e.Dev, e.Ino}]; ok && c == ctime {
		ctime = e.CTime
	}
	if st.Mtim.Nano() != e.MTime || e.Kind == model.KindFile && st.Size != e.Size || ctime != e.CTime {
		return errChanged
	}
	return nil
}

// parent opens e's parent directory at SRC (cached from the last call)
// and returns e's full name for messages, the directory and e's name in
// it.
func (s *srcRemover) parent(e *model.Entry) (full string, dfd int, base string, err error) {
	dir, base := path.Split(e.Path)
	dir = strings.TrimSuffix(dir, "/")
	full = filepath.Join(s.root, filepath.FromSlash(e.Path))
	if s.file != "" {
		full = s.file
		dir, base = filepath.Dir(s.file), filepath.Base(s.file)
	}
	if s.dirFd >= 0 && s.dirName == dir {
		return full, s.dirFd, base, nil
	}
	s.close()
	var fd int
	if s.file != "" {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		fd, err = openBeneath(s.root, dir)
	}
	if err != nil {
		return full, -1, base, err
	}
	s.dirFd, s.dirName = fd, dir
	return full, fd, base, nil
}

func (s *srcRemover) close() {
	if s.dirFd >= 0 {
		unix.Close(s.dirFd)
		s.dirFd, s.dirName = -1, ""
	}
}

// openBeneath opens the directory rel (slash-separated; "" is root) under
// root a component at a time, never following a symlink: one that a local
// user swapped in for a directory of SRC is refused, so nothing outside
// SRC is removed through it.
func openBeneath(root, rel string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(root, flags&^unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, err
	}
	if rel == "" || rel == "." {
		return fd, nil
	}
	for comp := range strings.SplitSeq(rel, "/") {
		nfd, err := unix.Openat(fd, comp, flags, 0)
		unix.Close(fd)
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return -1, fmt.Errorf("%w: %s is no longer a directory", errChanged, comp)
			}
			return -1, err
		}
		fd = nfd
	}
	return fd, nil
}

// removeDirs removes SRC's directories the pass went through that are
// left empty, deepest first, never SRC itself: one not empty (a file
// kept, or one added since) stays, silently, as rmdir leaves it.
func (s *srcRemover) removeDirs() (removed int) {
	dirs := slices.DeleteFunc(slices.Clone(s.dirs), func(d string) bool { return d == "." || d == "" })
	slices.SortFunc(dirs, func(a, b string) int {
		if c := strings.Count(b, "/") - strings.Count(a, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, d := range slices.Compact(dirs) {
		parent, base := path.Split(d)
		fd, err := openBeneath(s.root, strings.TrimSuffix(parent, "/"))
		if err != nil {
			continue
		}
		if unix.Unlinkat(fd, base, unix.AT_REMOVEDIR) == nil {
			removed++
		}
		unix.Close(fd)
	}
	return removed
}

// finishRemove closes what the remover holds, removes the empty
// directories with --remove-source-dirs after a pass without errors, and
// says what it removed.
func (j *job) finishRemove(ok bool) {
	s := j.rm
	if s == nil {
		return
	}
	s.close()
	// A file kept for having changed is an error, as in rsync (its exit
	// 23): the move is not complete. Counted once the pass is over, so
	// that it holds no --delete back (DEST is as it should be).
	j.failed += s.kept
	dirs := 0
	if ok && j.flags.RemoveSourceDirs {
		dirs = s.removeDirs()
	}
	if j.flags.Quiet && s.kept == 0 {
		return
	}
	msg := fmt.Sprintf("%d source files removed", s.removed)
	if dirs > 0 {
		msg += fmt.Sprintf(", %d directories", dirs)
	}
	if s.kept > 0 {
		msg += fmt.Sprintf("; %d kept (changed, or not removable: see above)", s.kept)
	}
	termsafe.Errorf(j.stderr, "%s", msg)
}
