// Package unixmode converts Go's fs.FileMode to the mode bits of Unix
// system calls (chmod, open, mkdir), special bits included, and changes
// those bits as rsync's --chmod does (Chmod).
package unixmode

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// Of returns the permission, setuid, setgid and sticky bits of m as Unix
// mode bits.
func Of(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}
