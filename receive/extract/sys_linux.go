package extract

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The receiver's Linux calls: the package builds elsewhere with
// sys_other.go's stand-ins, where receiving is refused (Supported).

// Supported is nil where this package can receive: here.
func Supported() error { return nil }

const (
	oPath       = unix.O_PATH
	oTmpfile    = unix.O_TMPFILE
	atEmptyPath = unix.AT_EMPTY_PATH
	utimeOmit   = unix.UTIME_OMIT
	capChown    = unix.CAP_CHOWN
	capMknod    = unix.CAP_MKNOD
	spliceOK    = true
)

// hasCap reports whether capability c is in this process's effective
// set (where it cannot be asked: whether it runs as root).
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return os.Geteuid() == 0
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

// openBeneath is openat2(2) of p under dirfd, resolving no symlink and
// nothing out of dirfd.
func openBeneath(dirfd int, p string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	return unix.Openat2(dirfd, p, &how)
}

func fdatasync(fd int) error { return unix.Fdatasync(fd) }

// fallocate allocates n bytes of fd from off, growing its size.
func fallocate(fd int, off, n int64) error { return unix.Fallocate(fd, 0, off, n) }

// punchHole makes n bytes of fd from off a hole, its size kept.
func punchHole(fd int, off, n int64) error {
	return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

func mknodat(dfd int, name string, mode uint32, major, minor uint32) error {
	return unix.Mknodat(dfd, name, mode, int(unix.Mkdev(major, minor)))
}

// pipe2 makes a non-blocking pipe, with a 1 MiB buffer where it may.
func pipe2(p *[2]int) error {
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return err
	}
	unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 1<<20) // best effort
	return nil
}

// splice moves up to n bytes from rfd to wfd (SPLICE_F_MOVE; nonblock:
// SPLICE_F_NONBLOCK too).
func splice(rfd, wfd, n int, nonblock bool) (int64, error) {
	flags := unix.SPLICE_F_MOVE
	if nonblock {
		flags |= unix.SPLICE_F_NONBLOCK
	}
	return unix.Splice(rfd, nil, wfd, nil, n, flags)
}

// copyFileRange is copy_file_range(2) of up to n bytes from sfd to fd at
// their offsets.
func copyFileRange(sfd, fd, n int) (int, error) { return unix.CopyFileRange(sfd, nil, fd, nil, n, 0) }

// fileClone makes dst share src's blocks (FICLONE: btrfs, XFS with reflink).
func fileClone(dst, src int) error { return unix.IoctlFileClone(dst, src) }

// identity is Receiver.Identity of the directory fd.
func identity(fd int) string {
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_INO == 0 {
		return ""
	}
	id := fmt.Sprintf("dev=%d:%d ino=%d", st.Dev_major, st.Dev_minor, st.Ino)
	if st.Mask&unix.STATX_BTIME != 0 && st.Btime.Sec != 0 {
		id += fmt.Sprintf(" born=%d.%09d", st.Btime.Sec, st.Btime.Nsec)
	}
	if gen, err := unix.IoctlGetUint32(fd, fsIocGetVersion); err == nil {
		id += fmt.Sprintf(" gen=%d", gen)
	}
	return id
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long), which
// golang.org/x/sys/unix does not define: the kernel answers with the
// inode's generation, an int.
const fsIocGetVersion = 2<<30 | uint(unsafe.Sizeof(uintptr(0)))<<16 | 'v'<<8 | 1
