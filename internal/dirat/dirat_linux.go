// Package dirat makes the system calls of a small file as cheaply as they
// can be made: those on a name in an open directory (openat, fstatat)
// without allocating, the name made a C string on the stack, not on the
// heap as golang.org/x/sys/unix makes it; and on a memory filesystem all of
// a file's calls (open, stat, read, write, set times, close) without the
// runtime's bookkeeping (see Calls). The walk stats, the sender opens and
// the receiver creates one name per small file, and a cost each adds up
// over millions of files.
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
	return Calls{}.Open(dirfd, name, flags, mode)
}

// Lstat is fstatat(2) of name relative to dirfd without following a
// symlink, as unix.Fstatat with unix.AT_SYMLINK_NOFOLLOW, without an
// allocation when the name is shorter than nameMax (on amd64 and arm64;
// elsewhere through unix).
func Lstat(dirfd int, name string, st *unix.Stat_t) error {
	return Calls{}.Lstat(dirfd, name, st)
}

// SetMtime sets the descriptor fd's modification time to mtime (Unix
// nanoseconds) and leaves its access time alone: futimens(3).
func SetMtime(fd int, mtime int64) error { return Calls{}.SetMtime(fd, mtime) }

// Calls makes the system calls of the files of one filesystem. The zero
// value makes them as golang.org/x/sys/unix does, telling the runtime of
// each; Quick(true), on a memory filesystem, straight to the kernel.
//
// Why: a goroutine in a system call the runtime was told of gives up its
// processor (P) to another thread if the call lasts, and the runtime's
// monitor thread, which hands them on, wakes every 20 µs for as long as
// calls keep being made. A small file is four or five calls at each end, a
// few microseconds each on tmpfs: the entry and exit bookkeeping, the
// monitor's wake-ups (each a nanosleep and two context switches) and the
// hand-offs it starts cost a tenth of both ends' CPU there (make
// bench-cpu; the walk's and the sockets' calls stay told).
//
// Only where no call can wait for a device: a call the runtime was not
// told of holds its P, and a garbage collection waiting to stop the world
// waits for it too, for as long as the call takes. On tmpfs or ramfs that
// is microseconds; on a disk, a network filesystem or FUSE it may be
// seconds, so there the calls stay told.
type Calls struct{ quick bool }

// Quick returns the Calls that make the calls straight to the kernel if
// ok (see OnMemory), else the zero Calls. (Only on amd64 and arm64,
// whose calls it makes by number.)
func Quick(ok bool) Calls { return Calls{quick: ok && sysFstatat >= 0} }

// IsQuick reports whether c makes its calls straight to the kernel.
func (c Calls) IsQuick() bool { return c.quick }

// OnMemory reports whether the file or directory fd is on a memory
// filesystem (tmpfs, ramfs), whose calls never wait for a device, and its
// device number (st_dev): a file under it is on the same filesystem only
// if its own st_dev is the same (not a mount point).
func OnMemory(fd int) (bool, uint64) {
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &fs) != nil || unix.Fstat(fd, &st) != nil {
		return false, 0
	}
	switch uint32(fs.Type) {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return true, st.Dev
	}
	return false, st.Dev
}

// sys6 makes a call whose arguments hold no pointer. A call with a
// pointer (to a name or a buffer on the stack) calls unix.Syscall6 or
// unix.RawSyscall6 itself, converting the pointer in the call's own
// argument list: only there does the compiler keep what it points to
// alive and in place (a stack can move in any Go function the converted
// uintptr would be passed through).
func (c Calls) sys6(trap, a1, a2, a3 uintptr) error {
	var errno unix.Errno
	if c.quick {
		_, _, errno = unix.RawSyscall6(trap, a1, a2, a3, 0, 0, 0)
	} else {
		_, _, errno = unix.Syscall6(trap, a1, a2, a3, 0, 0, 0)
	}
	return errnoErr(errno)
}

func errnoErr(errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// Open is openat(2), as the package's Open.
func (c Calls) Open(dirfd int, name string, flags int, mode uint32) (int, error) {
	var buf [nameMax]byte
	if !cname(&buf, name) {
		return unix.Openat(dirfd, name, flags, mode)
	}
	var fd uintptr
	var errno unix.Errno
	if c.quick {
		fd, _, errno = unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags|unix.O_LARGEFILE), uintptr(mode), 0, 0)
	} else {
		fd, _, errno = unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags|unix.O_LARGEFILE), uintptr(mode), 0, 0)
	}
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// Lstat is fstatat(2) without following a symlink, as the package's Lstat.
func (c Calls) Lstat(dirfd int, name string, st *unix.Stat_t) error {
	var buf [nameMax]byte
	if sysFstatat < 0 || !cname(&buf, name) {
		return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	var errno unix.Errno
	if c.quick {
		_, _, errno = unix.RawSyscall6(uintptr(sysFstatat), uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	} else {
		_, _, errno = unix.Syscall6(uintptr(sysFstatat), uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	}
	return errnoErr(errno)
}

// Read is read(2), as unix.Read.
func (c Calls) Read(fd int, p []byte) (int, error) {
	if !c.quick {
		return unix.Read(fd, p)
	}
	return rawIO(unix.SYS_READ, fd, p)
}

// Write is write(2), as unix.Write.
func (c Calls) Write(fd int, p []byte) (int, error) {
	if !c.quick {
		return unix.Write(fd, p)
	}
	return rawIO(unix.SYS_WRITE, fd, p)
}

// rawIO is read or write (trap) of p, made straight to the kernel.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	n, _, errno := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return -1, errno
	}
	return int(n), nil
}

// Fstat is fstat(2), as unix.Fstat.
func (c Calls) Fstat(fd int, st *unix.Stat_t) error {
	if !c.quick {
		return unix.Fstat(fd, st)
	}
	_, _, errno := unix.RawSyscall(unix.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(st)), 0)
	return errnoErr(errno)
}

// Fchown is fchown(2), as unix.Fchown.
func (c Calls) Fchown(fd, uid, gid int) error {
	return c.sys6(unix.SYS_FCHOWN, uintptr(fd), uintptr(uid), uintptr(gid))
}

// Fchmod is fchmod(2), as unix.Fchmod.
func (c Calls) Fchmod(fd int, mode uint32) error {
	return c.sys6(unix.SYS_FCHMOD, uintptr(fd), uintptr(mode), 0)
}

// SetMtime is the package's SetMtime.
func (c Calls) SetMtime(fd int, mtime int64) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime)}
	// utimensat(fd, NULL, ts, 0) is futimens(3).
	var errno unix.Errno
	if c.quick {
		_, _, errno = unix.RawSyscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	} else {
		_, _, errno = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	}
	return errnoErr(errno)
}

// Close is close(2), as unix.Close.
func (c Calls) Close(fd int) error {
	return c.sys6(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}
