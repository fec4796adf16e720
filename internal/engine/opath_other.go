//go:build unix && !linux

package engine

import "golang.org/x/sys/unix"

// oPathFlag opens a name to fstat it. Without O_PATH, a read-only open
// that does not wait for a FIFO's writer: a symlink (O_NOFOLLOW) or a
// file this user may not read fails to open, and is left in place with
// its error.
const oPathFlag = unix.O_RDONLY | unix.O_NONBLOCK
