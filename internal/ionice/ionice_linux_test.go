//go:build linux

package ionice

import (
	"errors"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// refused skips the test if the kernel (or a seccomp filter) refuses err.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("%s: the kernel refuses: %v", what, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// everyThread checks that get reports want for the calling thread, every
// thread in /proc/self/task, and threads started afterwards.
func everyThread[T comparable](t *testing.T, what string, want T, get func(tid int) (T, error)) {
	t.Helper()
	if got, err := get(0); err != nil || got != want {
		t.Errorf("%s: calling thread: %v, %v; want %v", what, got, err, want)
	}
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	old := map[int]bool{}
	for _, tid := range tids {
		old[tid] = true
		if got, err := get(tid); err != nil || got != want {
			t.Errorf("%s: thread %d: %v, %v; want %v", what, tid, got, err, want)
		}
	}
	// More goroutines than threads, each locking its thread and blocking
	// there until all have, make the runtime start new threads.
	n := len(tids) + 4
	var wg, ready sync.WaitGroup
	ready.Add(n)
	release := make(chan struct{})
	newTids := make(chan int, n)
	for range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid := unix.Gettid()
			if got, err := get(0); err != nil || got != want {
				t.Errorf("%s: thread %d: %v, %v; want %v", what, tid, got, err, want)
			}
			if !old[tid] {
				newTids <- tid
			}
			ready.Done()
			<-release
		})
	}
	ready.Wait()
	close(release)
	wg.Wait()
	t.Logf("%s: %d threads at first, %d started later", what, len(tids), len(newTids))
}

func TestIOPrio(t *testing.T) {
	class, level, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("at first: class %d level %d", class, level)
	t.Cleanup(func() {
		// Back to what it was (realtime only if privileged).
		if err := setIOPrio(class<<ioprioClassShift|level, "as it was"); err != nil {
			t.Log(err)
		}
	})

	refused(t, "SetIdle", SetIdle())
	type prio struct{ class, level int }
	getPrio := func(tid int) (prio, error) { c, l, err := get(tid); return prio{c, l}, err }
	everyThread(t, "idle", prio{ClassIdle, 0}, getPrio)

	refused(t, "SetBestEffort(7)", SetBestEffort(7))
	everyThread(t, "best effort 7", prio{ClassBestEffort, 7}, getPrio)
}

func TestNice(t *testing.T) {
	was, err := nice(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetNice(was) }) // fails unless privileged: no matter
	want := min(was+1, 19)
	refused(t, "SetNice", SetNice(want))
	everyThread(t, "nice", want, nice)
}

func TestBadValues(t *testing.T) {
	for _, level := range []int{-1, 8, 100} {
		if err := SetBestEffort(level); err == nil {
			t.Errorf("SetBestEffort(%d) = nil, want an error", level)
		}
	}
	for _, n := range []int{-21, 20} {
		if err := SetNice(n); err == nil {
			t.Errorf("SetNice(%d) = nil, want an error", n)
		}
	}
}
