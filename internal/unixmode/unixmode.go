// Package unixmode converts Go's fs.FileMode to the mode bits of Unix
// system calls (chmod, open, mkdir), special bits included, and changes
// those bits as rsync's --chmod does (Chmod).
package unixmode

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// special pairs each special bit of fs.FileMode with its Unix bit.
var special = [...]struct {
	goBit   fs.FileMode
	unixBit uint32
}{{fs.ModeSetuid, unix.S_ISUID}, {fs.ModeSetgid, unix.S_ISGID}, {fs.ModeSticky, unix.S_ISVTX}}

// Of returns the permission, setuid, setgid and sticky bits of m as Unix
// mode bits.
func Of(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	for _, s := range special {
		if m&s.goBit != 0 {
			u |= s.unixBit
		}
	}
	return u
}

// FileMode is Of's inverse: Unix permission and special bits as an
// fs.FileMode.
func FileMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	for _, s := range special {
		if u&s.unixBit != 0 {
			m |= s.goBit
		}
	}
	return m
}

// Type is the type of the Unix mode u (its S_IFMT bits) as fs.FileMode
// type bits: 0 for a regular file, fs.ModeIrregular for one unknown.
func Type(u uint32) fs.FileMode {
	switch u & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}
