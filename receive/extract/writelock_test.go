package extract

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// The ranges of one file written at once take turns, those of two files
// do not wait for each other, and nothing is kept once the writers are
// done.
func TestFileLocksTakeTurns(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) int {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return int(f.Fd())
	}
	a1, a2 := open("a"), open("a") // one file, two descriptors (two ranges)
	b := open("b")
	var l fileLocks
	la1, done1 := l.hold(a1)
	la2, done2 := l.hold(a2)
	lb, doneB := l.hold(b)
	if la1 != la2 {
		t.Fatal("two descriptors of one file got two locks: their writes would not take turns")
	}
	if la1 == lb {
		t.Fatal("two files share a lock: their writes would wait for each other")
	}

	// Writers of one file never overlap; one of another file goes while
	// the first file's lock is held.
	var in, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				la1.do(func() error {
					if n := in.Add(1); n > most.Load() {
						most.Store(n)
					}
					in.Add(-1)
					return nil
				})
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d writers of one file at once, want 1", most.Load())
	}
	la1.Lock()
	ran := make(chan struct{})
	go func() { lb.do(func() error { close(ran); return nil }) }()
	<-ran // would hang if b's writer waited for a's lock
	la1.Unlock()

	done1()
	done2()
	doneB()
	if len(l.m) != 0 {
		t.Fatalf("%d locks kept after every writer was done", len(l.m))
	}
	var nilLock *fileLock
	called := false
	if err := nilLock.do(func() error { called = true; return nil }); err != nil || !called {
		t.Fatal("a write without a lock (fstat failed) did not run")
	}
}
