package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The test binary re-executes itself with JOURNAL_TEST_CHILD=MODE:PATH to
// play another bulkmove process.
func TestMain(m *testing.M) {
	if v := os.Getenv("JOURNAL_TEST_CHILD"); v != "" {
		mode, path, _ := strings.Cut(v, ":")
		os.Exit(child(mode, path))
	}
	os.Exit(m.Run())
}

func child(mode, path string) int {
	j, err := Open(path)
	switch mode {
	case "try": // exit 3 if the journal is locked
		if errors.Is(err, ErrLocked) {
			fmt.Println(err)
			return 3
		}
		if err != nil {
			fmt.Println(err)
			return 1
		}
		j.Close()
		return 0
	case "hold": // lock it, say so, and wait to be killed
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("locked")
		select {}
	case "append": // append batches for ever, printing each once it is durable
		if err != nil {
			fmt.Println(err)
			return 1
		}
		for i := 0; ; i++ {
			if err := j.Append(batch(i, 100)); err != nil {
				fmt.Println(err)
				return 1
			}
			fmt.Println(i)
		}
	}
	return 2
}

// batch returns the n files of batch i.
func batch(i, n int) []Entry {
	es := make([]Entry, n)
	for k := range es {
		es[k] = Entry{
			Path:  fmt.Sprintf("b%04d/f%05d", i, k),
			Size:  int64(i*n + k),
			MTime: 1_700_000_000_000_000_000 + int64(i*n+k),
			Mode:  0o644,
		}
	}
	return es
}

func done(j *Journal, e Entry) bool { return j.Done(e.Path, e.Size, e.MTime, e.Mode) }

func mustOpen(t testing.TB, path string) *Journal {
	t.Helper()
	j, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func mustAppend(t testing.TB, j *Journal, es []Entry) {
	t.Helper()
	if err := j.Append(es); err != nil {
		t.Fatal(err)
	}
}

func wantLoaded(t *testing.T, j *Journal, batches, files int64) {
	t.Helper()
	if b, f := j.Loaded(); b != batches || f != files {
		t.Errorf("Loaded() = %d batches, %d files; want %d, %d", b, f, batches, files)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "deeper", "j.journal")
	j := mustOpen(t, path)
	wantLoaded(t, j, 0, 0)
	for i := range 3 {
		mustAppend(t, j, batch(i, 10))
	}
	mustAppend(t, j, nil) // records nothing
	if done(j, batch(0, 10)[0]) {
		t.Error("Done sees this run's appends")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got, want := fileSize(t, path), int64(headerLen+3*(recHdrLen+10*entryLen)); got != want {
		t.Errorf("file is %d bytes, want %d", got, want)
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("parent directory: %v, %v; want mode 0700", fi.Mode(), err)
	}

	j = mustOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, 3, 30)
	if j.Dropped() != 0 {
		t.Errorf("Dropped() = %d", j.Dropped())
	}
	for i := range 3 {
		for _, e := range batch(i, 10) {
			if !done(j, e) {
				t.Errorf("%s not done", e.Path)
			}
		}
	}
	if e := batch(3, 1)[0]; done(j, e) {
		t.Errorf("%s done, never appended", e.Path)
	}
}

func TestDoneChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	e := Entry{Path: "a/b", Size: 10, MTime: 1234567890123456789, Mode: 0o644}
	j := mustOpen(t, path)
	mustAppend(t, j, []Entry{e, {Path: "again", Size: 1, MTime: 1}, {Path: "again", Size: 2, MTime: 2}})
	j.Close()
	j = mustOpen(t, path)
	defer j.Close()
	for _, c := range []struct {
		name string
		e    Entry
		want bool
	}{
		{"same", e, true},
		{"permissions only", Entry{e.Path, e.Size, e.MTime, 0o600}, true},
		{"size", Entry{e.Path, e.Size + 1, e.MTime, e.Mode}, false},
		{"mtime", Entry{e.Path, e.Size, e.MTime + 1, e.Mode}, false},
		{"type", Entry{e.Path, e.Size, e.MTime, uint32(fs.ModeSymlink | 0o777)}, false},
		{"path", Entry{"a/c", e.Size, e.MTime, e.Mode}, false},
		{"last record of a path", Entry{"again", 2, 2, 0}, true},
		{"earlier record of a path", Entry{"again", 1, 1, 0}, false},
	} {
		if got := done(j, c.e); got != c.want {
			t.Errorf("%s: Done = %v, want %v", c.name, got, c.want)
		}
	}
}

// Three batches of 10 files on disk; return the path and each record's end.
func threeBatches(t *testing.T) (string, []int64) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	var ends []int64
	for i := range 3 {
		mustAppend(t, j, batch(i, 10))
		ends = append(ends, fileSize(t, path))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path, ends
}

func TestTornTail(t *testing.T) {
	for _, c := range []struct {
		name    string
		damage  func(t *testing.T, path string, ends []int64)
		batches int64 // loaded
	}{
		{"truncated by 3 bytes", func(t *testing.T, path string, ends []int64) {
			os.Truncate(path, ends[2]-3)
		}, 2},
		{"only part of the last record header", func(t *testing.T, path string, ends []int64) {
			os.Truncate(path, ends[1]+5)
		}, 2},
		{"garbage appended", func(t *testing.T, path string, ends []int64) {
			appendBytes(t, path, []byte("\x20\x00\x00\x00garbage, not a record"))
		}, 3},
		{"zeroes appended (power loss)", func(t *testing.T, path string, ends []int64) {
			appendBytes(t, path, make([]byte, 4096))
		}, 3},
		{"a length past the end", func(t *testing.T, path string, ends []int64) {
			appendBytes(t, path, []byte{0x00, 0x00, 0x01, 0x00, 1, 2, 3, 4})
		}, 3},
		{"a flipped bit in the middle record", func(t *testing.T, path string, ends []int64) {
			b, _ := os.ReadFile(path)
			b[ends[0]+recHdrLen+20] ^= 0x10
			os.WriteFile(path, b, 0o600)
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, ends := threeBatches(t)
			c.damage(t, path, ends)
			before := fileSize(t, path)
			j := mustOpen(t, path)
			wantLoaded(t, j, c.batches, c.batches*10)
			end := ends[c.batches-1]
			if got := fileSize(t, path); got != end {
				t.Errorf("after Open the file is %d bytes, want %d (cut at the last good record)", got, end)
			}
			if j.Dropped() != before-end {
				t.Errorf("Dropped() = %d, want %d", j.Dropped(), before-end)
			}
			for i := range 3 {
				if got, want := done(j, batch(i, 10)[9]), int64(i) < c.batches; got != want {
					t.Errorf("batch %d: Done = %v, want %v", i, got, want)
				}
			}
			// The next run's appends land after the good records.
			mustAppend(t, j, batch(7, 10))
			j.Close()
			j = mustOpen(t, path)
			defer j.Close()
			wantLoaded(t, j, c.batches+1, (c.batches+1)*10)
			if !done(j, batch(7, 10)[3]) || !done(j, batch(0, 10)[3]) {
				t.Error("records lost after the repair")
			}
		})
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestHeader(t *testing.T) {
	dir := t.TempDir()
	t.Run("torn header", func(t *testing.T) {
		path := filepath.Join(dir, "torn")
		os.WriteFile(path, header[:3], 0o600)
		j := mustOpen(t, path)
		wantLoaded(t, j, 0, 0)
		mustAppend(t, j, batch(0, 2))
		j.Close()
		j = mustOpen(t, path)
		defer j.Close()
		wantLoaded(t, j, 1, 2)
	})
	for _, c := range []struct{ name, content string }{
		{"some other file", "hello, world\n"},
		{"short other file", "hi"},
		{"a later version", "BMJRNL\x00\x02"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			os.WriteFile(path, []byte(c.content), 0o600)
			_, err := Open(path)
			if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open: %v; want ErrNotJournal naming %s", err, path)
			}
			if b, _ := os.ReadFile(path); string(b) != c.content {
				t.Errorf("the file was changed to %q", b)
			}
			// Refusing released the lock.
			if out, code := runChild(t, "try", path); code == 3 {
				t.Errorf("still locked after a failed Open: %s", out)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Open of a directory: %v", err)
		}
	})
}

func TestConcurrentAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	const workers, perWorker, files = 8, 40, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if err := j.Append(batch(w*perWorker+i, files)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d appends, %d syncs", workers*perWorker, j.flushes)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, workers*perWorker, workers*perWorker*files)
	for i := range workers * perWorker {
		for _, e := range batch(i, files) {
			if !done(j, e) {
				t.Fatalf("%s not done", e.Path)
			}
		}
	}
}

// Appends that arrive while a sync is in flight share the next one.
func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	defer j.Close()
	j.mu.Lock()
	j.flushing = true // as if another Append were syncing
	j.mu.Unlock()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- j.Append(batch(i, 3)) }()
	}
	for {
		j.mu.Lock()
		q := j.queued
		j.mu.Unlock()
		if q == n {
			break
		}
		runtime.Gosched()
	}
	j.mu.Lock()
	j.flushing = false
	j.cond.Broadcast()
	j.mu.Unlock()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if j.flushes != 1 {
		t.Errorf("%d appends took %d syncs, want 1", n, j.flushes)
	}
	if got, want := fileSize(t, path), int64(headerLen+n*(recHdrLen+3*entryLen)); got != want {
		t.Errorf("file is %d bytes, want %d", got, want)
	}
}

func TestLargeBatchSplits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	es := batch(0, MaxRecordEntries+5)
	mustAppend(t, j, es)
	j.Close()
	j = mustOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, 2, MaxRecordEntries+5)
	if !done(j, es[0]) || !done(j, es[len(es)-1]) {
		t.Error("entries of a split batch not done")
	}
}

func TestLockSameProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	_, err := Open(path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another bulkmove is using it") {
		t.Errorf("second Open: %v; want ErrLocked naming %s", err, path)
	}
	j.Close()
	j = mustOpen(t, path)
	j.Close()
}

// runChild runs the test binary as another process in mode on path.
func runChild(t *testing.T, mode, path string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JOURNAL_TEST_CHILD="+mode+":"+path)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// startChild starts the test binary in mode on path, returning it and its
// output lines.
func startChild(t *testing.T, mode, path string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "JOURNAL_TEST_CHILD="+mode+":"+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

func TestLockOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")

	// We hold it: another process is refused, and so is flock(1).
	j := mustOpen(t, path)
	out, code := runChild(t, "try", path)
	if code != 3 || !strings.Contains(out, path) {
		t.Errorf("child Open while we hold the lock: exit %d, %q; want refused", code, out)
	}
	if flock, err := exec.LookPath("flock"); err == nil {
		if err := exec.Command(flock, "-n", path, "true").Run(); err == nil {
			t.Error("flock -n got the lock we hold")
		}
	}
	j.Close()
	if out, code := runChild(t, "try", path); code != 0 {
		t.Errorf("child Open after Close: exit %d, %q", code, out)
	}

	// Another process holds it: we are refused until it is killed.
	cmd, lines := startChild(t, "hold", path)
	if !lines.Scan() || lines.Text() != "locked" {
		t.Fatalf("child: %q, %v", lines.Text(), lines.Err())
	}
	if _, err := Open(path); !errors.Is(err, ErrLocked) {
		t.Errorf("Open while a child holds the lock: %v", err)
	}
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	j = mustOpen(t, path)
	j.Close()
}

// A sender killed with SIGKILL in the middle of appending: every batch whose
// Append had returned is there on the next run.
func TestKilledWhileAppending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	cmd, lines := startChild(t, "append", path)
	acked := -1
	for lines.Scan() {
		n, err := strconv.Atoi(lines.Text())
		if err != nil {
			t.Fatalf("child: %s", lines.Text())
		}
		acked = n
		if n == 30 {
			cmd.Process.Kill()
		}
	}
	cmd.Wait()
	if acked < 30 {
		t.Fatalf("child acknowledged only %d batches", acked+1)
	}
	j := mustOpen(t, path)
	defer j.Close()
	b, _ := j.Loaded()
	t.Logf("%d batches acknowledged, %d loaded, %d bytes dropped", acked+1, b, j.Dropped())
	if b < int64(acked+1) {
		t.Errorf("loaded %d batches, want at least %d", b, acked+1)
	}
	for i := 0; i <= acked; i++ {
		for _, e := range batch(i, 100) {
			if !done(j, e) {
				t.Fatalf("%s not done", e.Path)
			}
		}
	}
}

func TestFinish(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	mustAppend(t, j, batch(0, 5))
	if err := j.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("journal still there after Finish: %v", err)
	}
	if err := j.Finish(); err != nil {
		t.Errorf("second Finish: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Errorf("Close after Finish: %v", err)
	}
	if err := j.Append(batch(1, 1)); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Append after Finish: %v; want an error naming %s", err, path)
	}
	j = mustOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, 0, 0)
}

// A write that fails names the journal, and the journal stays failed.
func TestWriteError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := mustOpen(t, path)
	mustAppend(t, j, batch(0, 5))
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good := j.f
	j.f = ro // writes now fail with EBADF, as a full disk would fail them
	err = j.Append(batch(1, 5))
	if err == nil || !strings.Contains(err.Error(), "journal "+path+": write: ") {
		t.Errorf("Append on a failing file: %v; want an error naming %s", err, path)
	}
	if err2 := j.Append(batch(2, 5)); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("Append after a failure: %v; want %v again", err2, err)
	}
	j.Close()
	good.Close()
	j = mustOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, 1, 5)
}

func TestDefaultPath(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	p := func(src, dst string, opts ...string) string {
		t.Helper()
		s, err := DefaultPath(src, dst, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := p("/src", "host:/dst", "exclude=*.o")
	dir, file := filepath.Split(base)
	if dir != filepath.Join(state, "bulkmove", "journal")+"/" || !strings.HasSuffix(file, ".journal") || len(file) != 32+len(".journal") {
		t.Errorf("DefaultPath = %s, want %s/bulkmove/journal/<32 hex>.journal", base, state)
	}
	if again := p("/src/", "host:/dst", "exclude=*.o"); again != base {
		t.Errorf("the same job gave %s and %s", base, again)
	}
	for _, other := range []string{
		p("/src2", "host:/dst", "exclude=*.o"),
		p("/src", "host:/dst2", "exclude=*.o"),
		p("/src", "host:/dst"),
		p("/src", "host:/dst", "exclude=*.c"),
		p("/src", "host:/dst", "exclude=*.o", "keep-setid"),
		p("/src", "host:/dst", "exclude=*", ".o"),
	} {
		if other == base {
			t.Errorf("another job has the same journal %s", other)
		}
	}

	t.Chdir("/tmp")
	if p("a", "d") != p("/tmp/a", "d") {
		t.Error("a relative SRC is not made absolute")
	}

	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"", "relative/state"} {
		t.Setenv("XDG_STATE_HOME", v)
		if got := p("/src", "d"); !strings.HasPrefix(got, filepath.Join(home, ".local", "state", "bulkmove", "journal")+"/") {
			t.Errorf("XDG_STATE_HOME=%q: DefaultPath = %s, want it under ~/.local/state", v, got)
		}
	}
}

// writeJournal writes a journal of n files in batches of 1000 directly (no
// fsync per batch) and returns the paths.
func writeJournal(tb testing.TB, path string, n int) []string {
	tb.Helper()
	paths := make([]string, n)
	var buf bytes.Buffer
	buf.Write(header[:])
	es := make([]Entry, 0, 1000)
	for i := range n {
		paths[i] = fmt.Sprintf("dir%04d/sub%02d/file-%08d.dat", i/10000, i%97, i)
		es = append(es, Entry{Path: paths[i], Size: int64(i), MTime: int64(i) * 1000, Mode: 0o644})
		if len(es) == cap(es) || i == n-1 {
			buf.Write(encode(es))
			es = es[:0]
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return paths
}

// heapOfOpen opens path and returns the journal and the heap it keeps.
func heapOfOpen(tb testing.TB, path string) (*Journal, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	j := mustOpen(tb, path)
	runtime.GC()
	runtime.ReadMemStats(&after)
	return j, after.HeapAlloc - before.HeapAlloc
}

func TestMemory(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	path := filepath.Join(t.TempDir(), "j")
	writeJournal(t, path, n)
	j, heap := heapOfOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, int64(n+999)/1000, int64(n))
	per := float64(heap) / float64(n)
	t.Logf("%d files: %d bytes of heap, %.2f bytes/file", n, heap, per)
	if per > 18 {
		t.Errorf("%.2f bytes a file, want at most 18", per)
	}
}

// TestMemoryCapped: a journal of more files than MemEntries keeps about
// MemEntries of them in memory, the rest in the disk index, and Done
// answers as from the whole: every recorded file done, the last record of
// a path counting, a changed or unrecorded file not done. The heap the
// open journal keeps is that of MemEntries files (and a fence per 256 on
// disk), not of the whole journal.
func TestMemoryCapped(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	defer func(m int64) { MemEntries = m }(MemEntries)
	MemEntries = int64(n / 10)
	dir := t.TempDir()
	path := filepath.Join(dir, "j")
	paths := writeJournal(t, path, n)
	// Rerecorded with another size: the later record counts, wherever
	// the two records fall in the disk index's sorted runs.
	j := mustOpen(t, path)
	var again []Entry
	for i := 0; i < n; i += 1001 {
		again = append(again, Entry{Path: paths[i], Size: int64(i) + 1, MTime: int64(i) * 1000, Mode: 0o644})
	}
	mustAppend(t, j, again)
	j.Close()

	j, heap := heapOfOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, int64(n+999)/1000+1, int64(n+len(again)))
	if j.disk == nil {
		t.Fatalf("%d files with room for %d in memory: no disk index", n, MemEntries)
	}
	inMem := int64(len(j.idx.slots))
	t.Logf("%d files, MemEntries %d: %d in memory, %d on disk, %d bytes of heap", n, MemEntries, inMem, j.disk.Len(), heap)
	if inMem > MemEntries*11/10 || inMem < MemEntries*9/10 {
		t.Errorf("%d files in memory, want about MemEntries (%d)", inMem, MemEntries)
	}
	if limit := uint64(MemEntries)*18 + 1<<20; heap > limit {
		t.Errorf("the open journal keeps %d bytes of heap, want at most %d (MemEntries files)", heap, limit)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files beside the journal: %v, want only the journal (the disk index has no name)", ents)
	}
	for i, p := range paths {
		size := int64(i)
		if i%1001 == 0 {
			if j.Done(p, size, int64(i)*1000, 0o644) {
				t.Fatalf("%s: its earlier record counts", p)
			}
			size++
		}
		if !j.Done(p, size, int64(i)*1000, 0o644) {
			t.Fatalf("%s (number %d) not done", p, i)
		}
		if i%7 == 0 && (j.Done(p, size, int64(i)*1000+1, 0o644) || j.Done(p+"x", size, int64(i)*1000, 0o644)) {
			t.Fatalf("%s: a changed or an unrecorded file is done", p)
		}
	}
}

// BenchmarkOpen1M loads a journal of a million files and reports the heap
// the loaded journal keeps per file.
func BenchmarkOpen1M(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), "j")
	writeJournal(b, path, n)
	var heap uint64
	for b.Loop() {
		var j *Journal
		j, heap = heapOfOpen(b, path)
		j.Close()
	}
	b.ReportMetric(float64(heap)/n, "bytes/entry")
}

func BenchmarkDone(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), "j")
	paths := writeJournal(b, path, n)
	j := mustOpen(b, path)
	defer j.Close()
	b.Run("hit", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if !j.Done(paths[i], int64(i), int64(i)*1000, 0o644) {
				b.Fatal("not done")
			}
			if i++; i == n {
				i = 0
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if j.Done(paths[i]+"x", int64(i), int64(i)*1000, 0o644) {
				b.Fatal("done")
			}
			if i++; i == n {
				i = 0
			}
		}
	})
}

// BenchmarkAppend appends batches of 1000 files from several goroutines,
// as K streams acknowledging at once would; an op is one durable batch.
func BenchmarkAppend(b *testing.B) {
	j := mustOpen(b, filepath.Join(b.TempDir(), "j"))
	defer j.Close()
	es := batch(0, 1000)
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := j.Append(es); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(j.flushes), "batches/sync")
}

// TestDestination: a journal is bound to the destination it records. A run
// against the same destination resumes; one against another (the same
// name, deleted and made anew), or a journal that names none, starts
// afresh, and its records are gone for good, the disk index's too.
func TestDestination(t *testing.T) {
	defer func(m int64) { MemEntries = m }(MemEntries)
	MemEntries = 20 // most of the 100 files go to the disk index
	path := filepath.Join(t.TempDir(), "j")
	step := func(id string, wantDropped int64, wantDone, wantGone []Entry, add []Entry) {
		t.Helper()
		j := mustOpen(t, path)
		defer j.Close()
		dropped, err := j.Destination(id)
		if err != nil {
			t.Fatalf("Destination(%q): %v", id, err)
		}
		if dropped != wantDropped {
			t.Errorf("Destination(%q) dropped %d files, want %d", id, dropped, wantDropped)
		}
		for _, e := range wantDone {
			if !done(j, e) {
				t.Fatalf("destination %q: %s not done", id, e.Path)
			}
		}
		for _, e := range wantGone {
			if done(j, e) {
				t.Fatalf("destination %q: %s done, recorded for another destination", id, e.Path)
			}
		}
		mustAppend(t, j, add)
	}
	first, second := batch(0, 100), batch(1, 10)
	step("dev=0:45 ino=2 born=1.5", 0, nil, nil, first)
	step("dev=0:45 ino=2 born=1.5", 0, first, nil, nil)
	j := mustOpen(t, path)
	if _, err := j.Destination("dev=0:45 ino=2 born=1.5"); err != nil {
		t.Fatal(err)
	}
	wantLoaded(t, j, 1, 100) // the binding is not a file of the walk's
	j.Close()
	step("dev=0:45 ino=2 born=9.5", 100, nil, first, second) // made anew
	step("dev=0:45 ino=2 born=9.5", 0, second, first, nil)
	step("", 0, second, first, nil) // a receiver that cannot tell

	// A journal with no destination named (an earlier version's).
	os.Remove(path)
	j = mustOpen(t, path)
	mustAppend(t, j, first)
	j.Close()
	step("dev=0:45 ino=2 born=1.5", 100, nil, first, nil)
	j = mustOpen(t, path)
	defer j.Close()
	wantLoaded(t, j, 1, 1) // the binding only
	if got, want := fileSize(t, path), int64(headerLen+recHdrLen+entryLen); got != want {
		t.Errorf("the emptied journal is %d bytes, want %d (the header and the binding)", got, want)
	}
}
