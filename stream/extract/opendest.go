package extract

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
func OpenAt(parent *os.Root, rel string, opt Options) (*Receiver, error) {
	if err := opt.valid(); err != nil {
		return nil, err
	}
	root, err := OpenBeneath(parent, rel)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("open destination: %w", err)
	}
	return newReceiver(d, root.Name(), opt)
}

// OpenBeneath makes and opens the directory rel beneath parent, one
// component at a time, each opened in its parent's descriptor with no
// symlink followed, not even one that stays beneath parent (a root shared
// by several users' trees must not let one user's link redirect another
// user's job into its tree); a missing component is made in its parent's
// descriptor. A component that is a symlink, or is swapped for one while
// it is opened, fails with an error that says so (the os.Root of each
// component, opened by name, is checked to be the directory opened with
// O_NOFOLLOW). rel must be local ("" or "." is parent itself).
func OpenBeneath(parent *os.Root, rel string) (*os.Root, error) {
	if rel == "" {
		rel = "."
	}
	if rel != "." && !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%q is not beneath %s", rel, parent.Name())
	}
	// Lexical cleaning is what the walk does: it follows no symlink, so
	// "a/../b" is "b" on disk too.
	rel = filepath.Clean(rel)
	cur, err := parent.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return cur, nil
	}
	dir, err := cur.Open(".")
	if err != nil {
		cur.Close()
		return nil, err
	}
	names := strings.Split(rel, "/")
	for i, name := range names {
		at := strings.Join(names[:i+1], "/")
		next, nextDir, err := stepBeneath(cur, dir, name, at)
		cur.Close()
		dir.Close()
		if err != nil {
			return nil, err
		}
		cur, dir = next, nextDir
	}
	dir.Close()
	return cur, nil
}

// stepBeneath opens the directory name in r (open as d), making it if it
// is missing; at is its path beneath the first root, for messages.
func stepBeneath(r *os.Root, d *os.File, name, at string) (*os.Root, *os.File, error) {
	dfd := int(d.Fd())
	open := func() (int, error) {
		return unix.Openat(dfd, name, dirFlags, 0)
	}
	fd, err := open()
	if err == unix.ENOENT {
		if err = unix.Mkdirat(dfd, name, 0o755); err == nil || err == unix.EEXIST {
			fd, err = open()
		}
	}
	isLink := func() bool {
		var st unix.Stat_t
		return unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
	}
	switch {
	case err == unix.ELOOP || err == unix.ENOTDIR && isLink():
		return nil, nil, fmt.Errorf("%s: %w", at, ErrSymlinkBeneath)
	case err == unix.ENOTDIR:
		return nil, nil, fmt.Errorf("%s: not a directory", at)
	case err != nil:
		return nil, nil, fmt.Errorf("%s: %w", at, err)
	}
	f := os.NewFile(uintptr(fd), at)
	defer f.Close()
	// os.Root is the receiver's handle, and it follows a symlink that
	// stays inside r: it must be the very directory opened above.
	next, err := r.OpenRoot(name)
	if err != nil {
		if isLink() || errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("%s: %w", at, ErrSymlinkBeneath)
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, nil, fmt.Errorf("%s: %w", at, err)
	}
	if same, err := sameFile(f, next); err != nil || !same {
		next.Close()
		if err == nil {
			err = ErrSymlinkBeneath
		}
		return nil, nil, fmt.Errorf("%s: %w", at, err)
	}
	nextDir, err := next.Open(".")
	if err != nil {
		next.Close()
		return nil, nil, fmt.Errorf("%s: %w", at, err)
	}
	return next, nextDir, nil
}

// ErrSymlinkBeneath marks a destination reached through a symlink (or
// swapped for one while it was opened), which OpenBeneath refuses.
var ErrSymlinkBeneath = errors.New("a symlink (or swapped for one while it was opened); no symlink is followed to a destination")

// sameFile reports whether f and the directory of r are one inode.
func sameFile(f *os.File, r *os.Root) (bool, error) {
	a, err := f.Stat()
	if err != nil {
		return false, err
	}
	b, err := r.Stat(".")
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

// FreeSpace is what an unprivileged user may still write in the
// receiver's directory, in bytes (statfs f_bavail of the directory it
// holds, not of its name, which may lead elsewhere by now); 0 if unknown.
func (r *Receiver) FreeSpace() int64 {
	var st unix.Statfs_t
	if unix.Fstatfs(int(r.rootDir.Fd()), &st) != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
