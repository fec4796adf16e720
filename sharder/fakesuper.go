package sharder

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/internal/xattrs"
	"github.com/bulkmove/bulkmove/model"
)

// fakeStat gives rs, the lstat of the regular file or directory at full,
// what its user.rsync.%stat records (Options.FakeSuper: a tree written by
// an unprivileged rsync or bulkmove --fake-super): owner, mode with its
// setuid, setgid and sticky bits, and for an empty regular file standing
// for a device or special file (its data, if any, left), that type and
// a device's number. Where
// there is none, rs stays as lstat saw it, as with rsync. A directory
// recorded as anything else, or a file as a directory or symlink, is an
// error of the entry: it is not sent as what it is not.
//
// A regular file recorded as a symlink holds its target (rsync's
// do_symlink under --fake-super), returned as link.
func fakeStat(full string, rs *rawStat) (link string, err error) {
	if rs.typ != 0 && rs.typ != fs.ModeDir {
		return "", nil // Linux keeps no user.* attribute on the others
	}
	s, ok, err := xattrs.Target{Fd: -1, Path: full}.ReadStat()
	if err != nil {
		return "", &fs.PathError{Op: "read " + xattrs.StatName + " of", Path: full, Err: err}
	}
	if !ok {
		return "", nil
	}
	typ := unixmode.Type(s.Mode)
	if (typ == fs.ModeDir) != (rs.typ == fs.ModeDir) || typ == fs.ModeIrregular || typ == fs.ModeSymlink && rs.typ != 0 {
		return "", &fs.PathError{Op: "read " + xattrs.StatName + " of", Path: full,
			Err: fmt.Errorf("it records mode %o for a %s", s.Mode, map[bool]string{true: "directory", false: "regular file"}[rs.typ == fs.ModeDir])}
	}
	if typ == fs.ModeSymlink {
		b, err := readFakeLink(full)
		if err != nil {
			return "", &fs.PathError{Op: "read symlink kept as a file", Path: full, Err: err}
		}
		link = b
	}
	rs.typ = typ
	rs.perm = unixmode.FileMode(s.Mode)
	rs.uid, rs.gid = s.UID, s.GID
	rs.rdev = 0
	if typ&fs.ModeDevice != 0 {
		rs.rdev = model.Mkdev(s.Major, s.Minor)
	}
	return link, nil
}

// readFakeLink reads the target a regular file holds for a symlink: at
// most PATH_MAX bytes, as a target may be.
func readFakeLink(full string) (string, error) {
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4097)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return "", err
	}
	if n > 4096 {
		return "", errors.New("longer than a symlink's target may be")
	}
	return string(buf[:n]), nil
}
