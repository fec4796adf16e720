//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package journal

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock on f without waiting; it returns
// ErrLocked if another open file description holds one.
func lockFile(f *os.File) error {
	err := fdCall(f, func(fd int) error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}

// fdCall calls fn with f's descriptor, again while it fails with EINTR.
func fdCall(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for ferr = fn(int(fd)); ferr == unix.EINTR; ferr = fn(int(fd)) {
		}
	}); err != nil {
		return err
	}
	return ferr
}
