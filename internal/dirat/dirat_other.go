//go:build unix && !linux

package dirat

import "golang.org/x/sys/unix"

// Elsewhere than Linux the calls go through golang.org/x/sys/unix: the
// allocation-free and untold calls are made by Linux's numbers, and only
// the sending side (the walk's stats, the reads) runs there.

// Open is openat(2), as unix.Openat.
func Open(dirfd int, name string, flags int, mode uint32) (int, error) {
	return Calls{}.Open(dirfd, name, flags, mode)
}

// Lstat is fstatat(2) of name relative to dirfd without following a
// symlink, as unix.Fstatat with unix.AT_SYMLINK_NOFOLLOW.
func Lstat(dirfd int, name string, st *unix.Stat_t) error {
	return Calls{}.Lstat(dirfd, name, st)
}

// SetMtime sets the descriptor fd's modification time to mtime (Unix
// nanoseconds) and leaves its access time as it was.
func SetMtime(fd int, mtime int64) error { return Calls{}.SetMtime(fd, mtime) }

// Calls makes the system calls of the files of one filesystem; here
// always as golang.org/x/sys/unix makes them.
type Calls struct{}

// Quick returns the zero Calls: no call is made straight to the kernel
// here.
func Quick(bool) Calls { return Calls{} }

// IsQuick reports false: see Quick.
func (Calls) IsQuick() bool { return false }

// OnMemory reports false (no call is made straight to the kernel here,
// so it does not matter) and fd's device number.
func OnMemory(fd int) (bool, uint64) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false, 0
	}
	return false, uint64(st.Dev)
}

// Open is openat(2), as the package's Open.
func (Calls) Open(dirfd int, name string, flags int, mode uint32) (int, error) {
	return unix.Openat(dirfd, name, flags, mode)
}

// Lstat is fstatat(2) without following a symlink, as the package's Lstat.
func (Calls) Lstat(dirfd int, name string, st *unix.Stat_t) error {
	return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// Read is read(2), as unix.Read.
func (Calls) Read(fd int, p []byte) (int, error) { return unix.Read(fd, p) }

// Write is write(2), as unix.Write.
func (Calls) Write(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

// Fstat is fstat(2), as unix.Fstat.
func (Calls) Fstat(fd int, st *unix.Stat_t) error { return unix.Fstat(fd, st) }

// Fchown is fchown(2), as unix.Fchown.
func (Calls) Fchown(fd, uid, gid int) error { return unix.Fchown(fd, uid, gid) }

// Fchmod is fchmod(2), as unix.Fchmod.
func (Calls) Fchmod(fd int, mode uint32) error { return unix.Fchmod(fd, mode) }

// SetMtime is the package's SetMtime, by futimes(2) with the access time
// read back (microseconds: there is no futimens in golang.org/x/sys/unix
// here).
func (Calls) SetMtime(fd int, mtime int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(st.Atim)), unix.NsecToTimeval(mtime)})
}

// Close is close(2), as unix.Close.
func (Calls) Close(fd int) error { return unix.Close(fd) }
