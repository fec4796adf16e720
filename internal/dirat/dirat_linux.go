// Package dirat makes the system calls on a name in an open directory
// (openat, fstatat) without allocating: the name is made a C string on the
// stack, not on the heap as golang.org/x/sys/unix makes it. The walk stats,
// the sender opens and the receiver creates one name per small file, and
// an allocation each adds up over millions of files.
//
// It imports nothing of bulkmove and sits below both ends: package sharder
// stats the names it walks with it, package send/source opens the files it
// reads, package receive/extract creates the files it writes.
package dirat

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// nameMax is the longest name (with its NUL) built on the stack; a longer
// one goes through golang.org/x/sys/unix.
const nameMax = 256

// cname copies name into buf as a C string; false if it does not fit or
// holds a NUL (then the caller lets unix say what is wrong with it).
func cname(buf *[nameMax]byte, name string) bool {
	if len(name) >= nameMax {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return false
		}
		buf[i] = name[i]
	}
	buf[len(name)] = 0
	return true
}

// Open is openat(2): name relative to the directory dirfd (or to the
// working directory if dirfd is unix.AT_FDCWD), as unix.Openat, without
// an allocation when the name is shorter than nameMax.
func Open(dirfd int, name string, flags int, mode uint32) (int, error) {
	var buf [nameMax]byte
	if !cname(&buf, name) {
		return unix.Openat(dirfd, name, flags, mode)
	}
	// The buffer stays put during the call: a goroutine's stack is
	// neither grown nor moved while it is in a system call.
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags|unix.O_LARGEFILE), uintptr(mode), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// Lstat is fstatat(2) of name relative to dirfd without following a
// symlink, as unix.Fstatat with unix.AT_SYMLINK_NOFOLLOW, without an
// allocation when the name is shorter than nameMax (on amd64 and arm64;
// elsewhere through unix).
func Lstat(dirfd int, name string, st *unix.Stat_t) error {
	var buf [nameMax]byte
	if sysFstatat < 0 || !cname(&buf, name) {
		return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	_, _, errno := unix.Syscall6(uintptr(sysFstatat), uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
