// Package netnstest runs code of a test in another network namespace.
package netnstest

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs f on a thread in the network namespace at ns (a path:
// /run/netns/NAME for ip netns's, /proc/PID/ns/net): the sockets it
// makes belong there. The thread stays locked, so it ends with its
// goroutine rather than go back to the runtime in the wrong namespace.
func Do(ns string, f func()) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err == nil {
			f()
		}
		done <- err
	}()
	return <-done
}
