// Package zerocopy holds what the sending side's sendfile(2) and the
// receiving side's splice(2) share: the test of whether the kernel declined
// to move bytes between these two descriptors inside the kernel, in which
// case the caller falls back to read and write.
//
// It sits below both ends and imports nothing of bulkmove, so that the
// sender need not import the receiver (package receive/extract) for it.
package zerocopy

import "golang.org/x/sys/unix"

// Unsupported says whether err is the kernel declining splice (or
// sendfile, which splices) for these descriptors: nothing moved, and
// read and write will do.
func Unsupported(err error) bool {
	return err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP
}
