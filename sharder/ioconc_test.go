//go:build linux

package sharder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/model"
)

// TestWalkStatPool: with many lstats at once (a slow filesystem's
// setting), the walk still reports every entry once, with its directory
// before its files, and stops its stat workers.
func TestWalkStatPool(t *testing.T) {
	defer goleak.VerifyNone(t)
	src := testDir(t)
	want := map[string]bool{}
	for d := range 20 {
		for i := range 150 {
			p := fmt.Sprintf("d%02d/sub/f%03d", d, i)
			mkfile(t, filepath.Join(src, p), i)
			want[p] = true
		}
		check(t, os.Symlink("sub/f000", filepath.Join(src, fmt.Sprintf("d%02d/link", d))))
	}
	r := run(t, src, Options{BatchFiles: 64, Concurrency: 4, IO: ioconc.Fixed(16)})
	if r.err != nil || len(r.errs) != 0 {
		t.Fatalf("err %v, errors %v", r.err, r.errs)
	}
	seen := map[string]int{}
	for _, b := range r.batches {
		for _, e := range b.Entries {
			seen[e.Path]++
		}
	}
	for p := range want {
		if seen[p] != 1 {
			t.Errorf("%s reported %d times", p, seen[p])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d files reported, want %d", len(seen), len(want))
	}
	links := 0
	for _, e := range r.deferred {
		if e.Kind == model.KindSymlink {
			links++
			if e.Link != "sub/f000" {
				t.Errorf("%s: target %q", e.Path, e.Link)
			}
		}
	}
	if links != 20 {
		t.Errorf("%d symlinks reported, want 20", links)
	}
}

// TestWalkFlatDirectoryBoundedMemory: one directory of 200,000 entries is
// read and lstat'ed in chunks, many at once, and streamed out: the walk
// never holds the whole directory, however slowly its batches are taken.
func TestWalkFlatDirectoryBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 200,000 files")
	}
	defer goleak.VerifyNone(t)
	const n = 200_000
	src := testDir(t)
	dfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	check(t, err)
	for i := range n {
		fd, err := unix.Openat(dfd, fmt.Sprintf("file-with-a-longish-name-%07d", i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		check(t, err)
		unix.Close(fd)
	}
	unix.Close(dfd)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	})
	out := make(chan *model.Batch)
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), src, Options{IO: ioconc.Fixed(16)}, out)
		done <- err
	}()
	files := 0
	for b := range out {
		files += len(b.Entries)
		time.Sleep(time.Millisecond) // a consumer slower than the walk
	}
	close(stop)
	sampler.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if files != n {
		t.Fatalf("%d files reported, want %d", files, n)
	}
	// Held all at once, the entries alone would be 200,000 x (an Entry and
	// its name) ~ 40 MB, twice that with the garbage collector's slack.
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("heap grew by %.1f MiB at most", float64(grew)/(1<<20))
	if grew > 24<<20 {
		t.Errorf("the heap grew by %d MiB while walking one directory of %d entries: not bounded", grew>>20, n)
	}
}

// TestWalkSlowReadsSmallChunks: on a slow filesystem a directory is read
// a few dozen names at a time (each getdents there is a round trip and
// returns a few dozen), so its first names go on before the last are
// read; on a fast one, in chunks of readDirChunk. Every file is reported
// once either way.
func TestWalkSlowReadsSmallChunks(t *testing.T) {
	src := testDir(t)
	for i := range 100 {
		mkfile(t, filepath.Join(src, "d", fmt.Sprintf("f%03d", i)), 1)
	}
	slow := ioconc.Auto(0)
	for range 16 {
		slow.Observe(time.Millisecond)
	}
	for _, tc := range []struct {
		name  string
		io    *ioconc.Gauge
		reads int // readdir calls of d at least
		most  int // ... and at most
	}{
		{"fast", nil, 1, 2},
		{"slow", slow, (100 + slowReadDirChunk - 1) / slowReadDirChunk, (100+slowReadDirChunk-1)/slowReadDirChunk + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reads atomic.Int64
			r := run(t, src, Options{Concurrency: 2, IO: tc.io, hooks: &testHooks{readDir: func(rel string) error {
				if rel == "d" {
					reads.Add(1)
				}
				return nil
			}}})
			if r.err != nil || len(r.errs) != 0 {
				t.Fatalf("err %v, errors %v", r.err, r.errs)
			}
			files := 0
			for _, b := range r.batches {
				files += len(b.Entries)
			}
			if files != 100 {
				t.Errorf("%d files reported, want 100", files)
			}
			if n := int(reads.Load()); n < tc.reads || n > tc.most {
				t.Errorf("d read in %d readdir calls, want %d to %d", n, tc.reads, tc.most)
			}
		})
	}
}
