package engine

import "golang.org/x/sys/unix"

// oPathFlag opens a name to fstat it, whatever its type (a symlink with
// O_NOFOLLOW, a FIFO, a file it may not read): O_PATH.
const oPathFlag = unix.O_PATH
