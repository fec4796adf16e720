package extract

// Path safety: which names the receiver writes (CheckName,
// CheckLinkTarget) and how it reaches a directory beneath the root
// (openDir), following no symlink, so that no entry, and no directory of
// DEST swapped for a symlink while a job runs, leads outside the root.
// Every create, link, rename and unlink of the receiver is made in a
// directory descriptor opened here.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sys/unix"
)

// CheckName reports whether p is a name the receiver will create: local,
// slash-separated, clean, no empty or NUL-containing component. "." (the
// root itself) is allowed only for directories.
func CheckName(p string, k model.Kind) error {
	if p == "." && k == model.KindDir {
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
		fd, err := openBeneath(int(r.rootDir.Fd()), p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags)
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
