//go:build linux

package ionice

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// From linux/ioprio.h.
const (
	ioprioWhoProcess = 1
	ioprioClassShift = 13
	ioprioLevelMask  = 7
)

// SetIdle puts every thread of the process in the idle I/O class.
func SetIdle() error {
	return setIOPrio(ClassIdle<<ioprioClassShift, "idle")
}

// SetBestEffort puts every thread of the process in the best-effort I/O
// class at level (0, highest, to 7, lowest; the default is 4).
func SetBestEffort(level int) error {
	if level < 0 || level > 7 {
		return fmt.Errorf("ionice: best-effort level %d is not 0 to 7", level)
	}
	return setIOPrio(ClassBestEffort<<ioprioClassShift|level, "best-effort "+strconv.Itoa(level))
}

func setIOPrio(prio int, what string) error {
	return eachThread("ioprio_set "+what, func(tid int) error {
		_, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), uintptr(prio))
		if errno != 0 {
			return errno
		}
		return nil
	})
}

// Get returns the I/O class (ClassNone, ClassRealtime, ClassBestEffort or
// ClassIdle) and level of the calling thread, which after SetIdle or
// SetBestEffort is that of every thread.
func Get() (class, level int, err error) {
	return get(0)
}

// get returns the I/O class and level of thread tid, 0 for the calling one.
func get(tid int) (class, level int, err error) {
	prio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(tid), 0)
	if errno != 0 {
		return 0, 0, fmt.Errorf("ionice: ioprio_get: %w", errno)
	}
	return int(prio>>ioprioClassShift) & 7, int(prio) & ioprioLevelMask, nil
}

// SetNice sets the CPU nice value (-20, most favoured, to 19, least) of
// every thread of the process. Raising it needs no privilege; lowering it
// takes CAP_SYS_NICE or a RLIMIT_NICE that allows it.
func SetNice(n int) error {
	if n < -20 || n > 19 {
		return fmt.Errorf("ionice: nice value %d is not -20 to 19", n)
	}
	return eachThread("setpriority "+strconv.Itoa(n), func(tid int) error {
		return unix.Setpriority(unix.PRIO_PROCESS, tid, n)
	})
}

// nice returns the nice value of thread tid, 0 for the calling one.
func nice(tid int) (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return 0, fmt.Errorf("ionice: getpriority: %w", err)
	}
	return 20 - p, nil // the system call returns 20-nice, to keep clear of errors
}

// eachThread calls set for the calling thread (tid 0), then for every
// thread in /proc/self/task, listing it again until a listing shows no
// thread it has not set: one started meanwhile may have copied its values
// from a thread not set yet. A thread that has exited is passed over.
func eachThread(what string, set func(tid int) error) error {
	if err := set(0); err != nil {
		return fmt.Errorf("ionice: %s: %w", what, err)
	}
	done := map[int]bool{}
	for {
		tids, err := threads()
		if err != nil {
			return fmt.Errorf("ionice: %s: the calling thread only: %w", what, err)
		}
		more := false
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			if err := set(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("ionice: %s: thread %d: %w", what, tid, err)
			}
			done[tid], more = true, true
		}
		if !more {
			return nil
		}
	}
}

// threads lists the ids of the process's threads.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
