//go:build linux

package sharder

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/model"
)

// TestWalkTreeBoundedMemory walks a tree of 400,000 entries (396,000
// empty files in 4,000 directories) and checks that the walk's memory
// does not grow with the tree: the peak Go heap in use during the walk
// stays under 24 MiB, and the process's peak RSS (VmHWM, its peak reset
// before the walk) under 64 MiB. Measured here (2 cores, tmpfs): a heap
// peak of 4 MiB above the baseline, a VmHWM of 14 MiB; with the batches
// held as they come, 85 MiB and 95 MiB. It needs about 0.25 GiB of kernel
// memory for the tmpfs inodes, so it is skipped under -short, and under
// the race detector, which multiplies memory.
func TestWalkTreeBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a 400,000-entry tree: skipped under -short")
	}
	if raceEnabled {
		t.Skip("memory ceilings do not hold under the race detector")
	}
	const files, dirs = 396_000, 4_000
	root := testDir(t)
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err == nil && sfs.Files > 0 && sfs.Ffree < files+dirs+1000 {
		t.Skipf("%s has %d free inodes, the tree needs %d", root, sfs.Ffree, files+dirs)
	}
	src := filepath.Join(root, "src")
	start := time.Now()
	check(t, gentree.Small(src, files, dirs, 0))
	t.Logf("generated %d files in %d directories in %s", files, dirs, time.Since(start).Round(time.Millisecond))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	// VmHWM from here on: the earlier tests' peaks are not the walk's.
	hwmReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	start = time.Now()
	var deferred int64
	out := make(chan *model.Batch, 8)
	var got int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range out {
			got += int64(len(b.Entries))
		}
	}()
	st, err := Run(context.Background(), src, Options{Deferred: func(model.Entry) { deferred++ }}, out)
	<-done
	close(stop)
	<-sampled
	check(t, err)
	if st.Files != files || got != files || st.Dirs != dirs+1 || deferred != dirs+1 {
		t.Fatalf("walked %d files (%d in batches), %d directories (%d deferred); want %d and %d", st.Files, got, st.Dirs, deferred, files, dirs+1)
	}
	heap := int64(peak.Load()) - int64(base)
	hwm := vmHWM(t)
	t.Logf("walked %d entries in %s: peak heap in use %.1f MiB above the baseline, VmHWM %.1f MiB",
		files+dirs+1, time.Since(start).Round(time.Millisecond), float64(heap)/(1<<20), float64(hwm)/(1<<20))
	if heap > 24<<20 {
		t.Errorf("peak heap in use grew by %d MiB during the walk, want under 24 MiB", heap>>20)
	}
	if !hwmReset {
		t.Logf("VmHWM not checked: its peak could not be reset (/proc/self/clear_refs)")
	} else if hwm > 64<<20 {
		t.Errorf("VmHWM %d MiB, want under 64 MiB", hwm>>20)
	}
}

// vmHWM returns the process's peak resident set size, in bytes.
func vmHWM(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM: %v", err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/self/status")
	return 0
}

// TestWalkFlatDirsBounded: a flat directory of many subdirectories (each
// holding one file), walked with room for 1,000 directories to read in
// memory: every directory and file comes out once, and the walk never
// holds more than DirMem paths in memory; the rest wait on disk. So does
// ListDirs, the --delete listing, which also keeps its order. 30 times
// DirMem subdirectories: most of them wait on disk; more only makes the
// tree slower to make.
func TestWalkFlatDirsBounded(t *testing.T) {
	n := 30_000
	if testing.Short() || raceEnabled {
		n = 20_000
	}
	const mem = 1000
	root := testDir(t)
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err == nil && sfs.Files > 0 && sfs.Ffree < uint64(2*n+1000) {
		t.Skipf("%s has %d free inodes, the tree needs %d", root, sfs.Ffree, 2*n)
	}
	src := filepath.Join(root, "src")
	check(t, os.Mkdir(src, 0o755))
	for i := range n {
		d := filepath.Join(src, "d"+strconv.Itoa(i))
		check(t, os.Mkdir(d, 0o755))
		check(t, os.WriteFile(filepath.Join(d, "f"), nil, 0o644))
	}
	spillDir := t.TempDir()
	seen := map[string]int{}
	var mu sync.Mutex
	var peak int
	opt := Options{DirMem: mem, SpillDir: spillDir, Deferred: func(e model.Entry) { mu.Lock(); seen[e.Path]++; mu.Unlock() },
		hooks: &testHooks{dirPeak: func(p int) { peak = p }}}
	out := make(chan *model.Batch, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range out {
			mu.Lock()
			for _, e := range b.Entries {
				seen[e.Path]++
			}
			mu.Unlock()
		}
	}()
	st, err := Run(context.Background(), src, opt, out)
	<-done
	check(t, err)
	if st.Dirs != int64(n+1) || st.Files != int64(n) || st.Errors != 0 {
		t.Fatalf("walked %d directories, %d files, %d errors; want %d, %d, 0", st.Dirs, st.Files, st.Errors, n+1, n)
	}
	if len(seen) != 2*n+1 {
		t.Fatalf("%d distinct paths, want %d", len(seen), 2*n+1)
	}
	for p, c := range seen {
		if c != 1 {
			t.Fatalf("%s came out %d times", p, c)
		}
	}
	t.Logf("%d subdirectories: at most %d waiting in memory", n, peak)
	if peak > mem || peak == 0 {
		t.Errorf("at most %d directories to read in memory, want 1 to %d", peak, mem)
	}
	if ents, _ := os.ReadDir(spillDir); len(ents) > 0 {
		t.Errorf("files left in the spill directory: %v", ents)
	}

	// ListDirs: the same directories, in the order of a recursive
	// listing (a directory's subdirectories in the order read, each
	// listed right after the one before it and its subtree).
	var order []string
	listed := map[string]bool{}
	var peakList int
	check(t, listDirs(context.Background(), src, nil, Links{}, mem, spillDir, &peakList, func(dir string, names []string, more bool) error {
		if !more {
			order = append(order, dir)
		}
		listed[dir] = true
		return nil
	}))
	if len(order) != n+1 || len(listed) != n+1 || order[0] != "." {
		t.Fatalf("ListDirs listed %d directories (%d distinct), first %q; want %d, '.' first", len(order), len(listed), order[0], n+1)
	}
	f, err := os.Open(src)
	check(t, err)
	names, err := f.Readdirnames(-1)
	f.Close()
	check(t, err)
	for i, name := range names {
		if order[i+1] != name {
			t.Fatalf("ListDirs: directory %d is %q, want %q (readdir order)", i+1, order[i+1], name)
		}
	}
	t.Logf("ListDirs: at most %d directories to list in memory", peakList)
	if peakList > mem {
		t.Errorf("ListDirs held %d directories to list in memory, want at most %d", peakList, mem)
	}
	if ents, _ := os.ReadDir(spillDir); len(ents) > 0 {
		t.Errorf("files left in the spill directory: %v", ents)
	}
}
