package extract

// Opening a destination beneath a parent directory (OpenAt,
// OpenBeneath), as a receiving daemon does for a job's destination under
// its root: one component at a time, no symlink followed, not even one
// that stays beneath the parent.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenAt is Open for the directory rel beneath parent, made and opened as
// OpenBeneath does: the receiver then works in that directory, whatever
// its name comes to lead to ("" or "." is parent itself, opened anew).
func OpenAt(parent *os.File, rel string, opt Options) (*Receiver, error) {
	if err := opt.valid(); err != nil {
		return nil, err
	}
	d, err := OpenBeneath(parent, rel)
	if err != nil {
		return nil, err
	}
	return newReceiver(d, d.Name(), opt)
}

// OpenBeneath makes and opens the directory rel beneath the directory
// parent, one component at a time, each opened in its parent's descriptor
// with O_NOFOLLOW, so that no symlink is followed, not even one that stays
// beneath parent (a root shared by several users' trees must not let one
// user's link redirect another user's job into its tree); a missing
// component is made in its parent's descriptor. A component that is a
// symlink, or is swapped for one while it is opened, fails with an error
// that says so. rel must be local ("" or "." is parent itself, opened
// anew).
func OpenBeneath(parent *os.File, rel string) (*os.File, error) {
	return openDirBeneath(parent, rel, true)
}

// openDirBeneath is OpenBeneath, making missing components only if create
// (else one missing fails with an error that wraps ENOENT).
func openDirBeneath(parent *os.File, rel string, create bool) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	if rel != "." && !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%q is not beneath %s", rel, parent.Name())
	}
	// Lexical cleaning is what the walk does: it follows no symlink, so
	// "a/../b" is "b" on disk too.
	rel = filepath.Clean(rel)
	fd, err := unix.Openat(int(parent.Fd()), ".", dirFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: parent.Name(), Err: err}
	}
	if rel != "." {
		names := strings.Split(rel, "/")
		for i, name := range names {
			next, err := stepBeneath(fd, name, strings.Join(names[:i+1], "/"), create)
			unix.Close(fd)
			if err != nil {
				return nil, err
			}
			fd = next
		}
	}
	return os.NewFile(uintptr(fd), filepath.Join(parent.Name(), rel)), nil
}

// stepBeneath opens the directory name in dfd with no symlink followed,
// making it if it is missing and create; at is its path beneath the
// first parent, for messages.
func stepBeneath(dfd int, name, at string, create bool) (int, error) {
	fd, err := unix.Openat(dfd, name, dirFlags, 0)
	// A name that goes missing between the make and the open is someone
	// renaming it away as we step (a local user racing the receiver): try
	// a few times, then fail naming it, never following what replaced it.
	for try := 0; err == unix.ENOENT && create && try < 8; try++ {
		if err = unix.Mkdirat(dfd, name, 0o755); err == nil || err == unix.EEXIST {
			fd, err = unix.Openat(dfd, name, dirFlags, 0)
		}
	}
	switch {
	case err == nil:
		return fd, nil
	case err == unix.ELOOP:
		return -1, fmt.Errorf("%s: %w", at, ErrSymlinkBeneath)
	case err == unix.ENOTDIR:
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, fmt.Errorf("%s: %w", at, ErrSymlinkBeneath)
		}
		return -1, fmt.Errorf("%s: not a directory", at)
	default:
		return -1, fmt.Errorf("%s: %w", at, err)
	}
}

// ErrSymlinkBeneath marks a destination reached through a symlink (or
// swapped for one while it was opened), which OpenBeneath refuses.
var ErrSymlinkBeneath = errors.New("a symlink (or swapped for one while it was opened); no symlink is followed to a destination")
