//go:build unix && !linux

package extract

import (
	"os"

	"golang.org/x/sys/unix"
)

// Stand-ins for sys_linux.go's calls, so that the sending side, which
// imports this package, builds here. Receiving is refused before any of
// them is reached (Supported); each fails with ENOSYS besides.

// Supported is nil where this package can receive: not here.
func Supported() error { return ErrNeedsLinux }

const (
	oPath       = 0
	oTmpfile    = 0
	atEmptyPath = 0
	utimeOmit   = 0
	capChown    = 0
	capMknod    = 0
	spliceOK    = false
)

func hasCap(int) bool { return os.Geteuid() == 0 }

func openBeneath(int, string, int) (int, error)         { return -1, unix.ENOSYS }
func fdatasync(fd int) error                            { return unix.Fsync(fd) }
func fallocate(int, int64, int64) error                 { return unix.ENOSYS }
func punchHole(int, int64, int64) error                 { return unix.ENOSYS }
func mknodat(int, string, uint32, uint32, uint32) error { return unix.ENOSYS }
func pipe2(*[2]int) error                               { return unix.ENOSYS }
func splice(int, int, int, bool) (int64, error)         { return 0, unix.ENOSYS }
func copyFileRange(int, int, int) (int, error)          { return 0, unix.ENOSYS }
func identity(int) string                               { return "" }
func fileClone(int, int) error                          { return unix.ENOSYS }
