//go:build linux

package sharder

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is everything a Run reported.
type result struct {
	batches  []*model.Batch
	deferred []model.Entry
	errs     map[string]error
	warns    map[string]string
	stats    Stats
	err      error
}

// files returns the entries of all batches.
func (r *result) files() []model.Entry {
	var fs []model.Entry
	for _, b := range r.batches {
		fs = append(fs, b.Entries...)
	}
	return fs
}

// byPath indexes every reported entry by path and fails on duplicates.
func (r *result) byPath(t *testing.T) map[string]model.Entry {
	t.Helper()
	m := make(map[string]model.Entry)
	for _, e := range append(r.files(), r.deferred...) {
		if _, dup := m[e.Path]; dup {
			t.Errorf("%q reported twice", e.Path)
		}
		m[e.Path] = e
	}
	return m
}

// run calls Run and drains its output, checking the invariants every run must keep.
func run(t *testing.T, src string, opt Options) *result {
	t.Helper()
	r := &result{errs: map[string]error{}, warns: map[string]string{}}
	var inCallback sync.Mutex // callbacks must never overlap
	opt.Deferred = func(e model.Entry) {
		if !inCallback.TryLock() {
			t.Error("callbacks called concurrently")
			return
		}
		defer inCallback.Unlock()
		r.deferred = append(r.deferred, e)
	}
	opt.OnError = func(p string, err error) {
		if !inCallback.TryLock() {
			t.Error("callbacks called concurrently")
			return
		}
		defer inCallback.Unlock()
		if _, dup := r.errs[p]; dup {
			t.Errorf("error for %q reported twice", p)
		}
		r.errs[p] = err
	}
	opt.OnWarn = func(p, msg string) {
		if !inCallback.TryLock() {
			t.Error("callbacks called concurrently")
			return
		}
		defer inCallback.Unlock()
		r.warns[p] = msg
	}
	out := make(chan *model.Batch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.stats, r.err = Run(context.Background(), src, opt, out)
	}()
	for b := range out {
		r.batches = append(r.batches, b)
	}
	<-done
	for i, b := range r.batches {
		if b.ID != uint64(i+1) {
			t.Errorf("batch %d has ID %d", i, b.ID)
		}
		if len(b.Entries) == 0 {
			t.Errorf("batch %d is empty", b.ID)
		}
		var sum int64
		for _, e := range b.Entries {
			if e.Kind != model.KindFile {
				t.Errorf("batch %d holds %s %q", b.ID, e.Kind, e.Path)
			}
			sum += e.Size
		}
		if sum != b.Bytes {
			t.Errorf("batch %d: Bytes %d, sum of sizes %d", b.ID, b.Bytes, sum)
		}
	}
	for _, e := range r.deferred {
		if e.Kind == model.KindFile {
			t.Errorf("Deferred got file %q", e.Path)
		}
	}
	if r.err == nil {
		st := r.stats
		var dirs, links, hard, specials int64
		for _, e := range r.deferred {
			switch {
			case e.Kind == model.KindDir:
				dirs++
			case e.Kind == model.KindSymlink:
				links++
			case e.Kind == model.KindHardlink:
				hard++
			case e.Kind.IsDevice() || e.Kind.IsSpecial():
				specials++
			}
		}
		var bytes int64
		for _, e := range r.files() {
			bytes += e.Size
		}
		got := Stats{Files: int64(len(r.files())), Dirs: dirs, Symlinks: links, Hardlinks: hard, Specials: specials,
			Skipped: int64(len(r.warns)), Errors: int64(len(r.errs)), Excluded: st.Excluded,
			Bytes: bytes, Batches: int64(len(r.batches))}
		if got != st {
			t.Errorf("stats %+v, counted %+v", st, got)
		}
	}
	return r
}

// testDir returns a fresh directory for a test tree, on tmpfs (/dev/shm)
// where there is one: on a disk filesystem creating an inode can cost a
// millisecond, which makes trees of thousands of files slow to build.
func testDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "sharder-test-"); err == nil {
			t.Cleanup(func() {
				// Restore search permission anywhere a test removed it.
				filepath.WalkDir(d, func(p string, de fs.DirEntry, err error) error {
					if de != nil && de.IsDir() {
						os.Chmod(p, 0o755)
					}
					return nil
				})
				if err := os.RemoveAll(d); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
			return d
		}
	}
	return t.TempDir()
}

func mkfile(t testing.TB, name string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t testing.TB, name string) {
	t.Helper()
	if err := os.MkdirAll(name, 0o755); err != nil {
		t.Fatal(err)
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// reference lists src with filepath.WalkDir and lstat, the slow obvious way.
func reference(t *testing.T, src string) map[string]fs.FileInfo {
	t.Helper()
	m := map[string]fs.FileInfo{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		m[filepath.ToSlash(rel)] = fi
		return nil
	})
	check(t, err)
	return m
}

func TestWalkEverythingOnce(t *testing.T) {
	src := testDir(t)
	long := strings.Repeat("L", 255)
	files := map[string]int{
		"top.txt":                    10,
		"empty":                      0,
		"a/one":                      100,
		"a/b/two":                    2000,
		"a/b/c/d/e/f/deep":           3,
		"with space/and space.txt":   7,
		"new\nline/na\nme":           8,
		"bad\xff\xfeutf8/\x80x":      9,
		long + "/" + long:            11,
		"many/" + long[:200] + "/z":  12,
		"spaces /  lead and trail  ": 13,
	}
	for i := range 300 {
		files[fmt.Sprintf("many/f%03d", i)] = i
	}
	for name, size := range files {
		mkfile(t, filepath.Join(src, name), size)
	}
	mkdir(t, filepath.Join(src, "emptydir"))
	mkdir(t, filepath.Join(src, "a/emptydir2"))
	check(t, os.Symlink("top.txt", filepath.Join(src, "link")))
	check(t, os.Symlink("../nowhere", filepath.Join(src, "a/dangling")))
	check(t, os.Symlink("loop", filepath.Join(src, "loop"))) // a symlink loop is just a symlink
	check(t, os.Symlink("a", filepath.Join(src, "dirlink"))) // never followed
	check(t, os.Symlink(long, filepath.Join(src, "a/"+long)))
	check(t, os.Chmod(filepath.Join(src, "a/one"), 0o755|fs.ModeSetuid|fs.ModeSetgid))
	check(t, os.Chmod(filepath.Join(src, "emptydir"), 0o1777|fs.ModeSticky))
	check(t, os.Chmod(filepath.Join(src, "a/b"), 0o555))
	mt := time.Unix(1234567890, 123456789)
	check(t, os.Chtimes(filepath.Join(src, "top.txt"), mt, mt))
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "a/b"), 0o755) })

	want := reference(t, src)
	r := run(t, src, Options{BatchFiles: 50, Concurrency: 4})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.errs) != 0 || len(r.warns) != 0 {
		t.Fatalf("errors %v, warnings %v", r.errs, r.warns)
	}
	got := r.byPath(t)
	for p, fi := range want {
		e, ok := got[p]
		if !ok {
			t.Errorf("%q not reported", p)
			continue
		}
		delete(got, p)
		st := fi.Sys().(*syscall.Stat_t)
		var wantKind model.Kind
		switch {
		case fi.Mode().IsRegular():
			wantKind = model.KindFile
		case fi.IsDir():
			wantKind = model.KindDir
		case fi.Mode()&fs.ModeSymlink != 0:
			wantKind = model.KindSymlink
		}
		if e.Kind != wantKind {
			t.Errorf("%q: kind %s, want %s", p, e.Kind, wantKind)
		}
		wantMode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		if e.Mode != wantMode {
			t.Errorf("%q: mode %v, want %v", p, e.Mode, wantMode)
		}
		if e.MTime != fi.ModTime().UnixNano() {
			t.Errorf("%q: mtime %d, want %d", p, e.MTime, fi.ModTime().UnixNano())
		}
		if e.UID != st.Uid || e.GID != st.Gid || e.Dev != uint64(st.Dev) || e.Ino != uint64(st.Ino) {
			t.Errorf("%q: uid/gid/dev/ino %d/%d/%d/%d, want %d/%d/%d/%d", p,
				e.UID, e.GID, e.Dev, e.Ino, st.Uid, st.Gid, st.Dev, st.Ino)
		}
		switch wantKind {
		case model.KindFile:
			if e.Size != fi.Size() {
				t.Errorf("%q: size %d, want %d", p, e.Size, fi.Size())
			}
		case model.KindSymlink:
			target, err := os.Readlink(filepath.Join(src, p))
			check(t, err)
			if e.Link != target {
				t.Errorf("%q: link %q, want %q", p, e.Link, target)
			}
		}
	}
	for p := range got {
		t.Errorf("%q reported but not in the tree", p)
	}
	if e := r.byPath(t)["top.txt"]; !e.ModTime().Equal(mt) {
		t.Errorf("top.txt mtime %v, want %v", e.ModTime(), mt)
	}
	if e := r.byPath(t)["a/one"]; e.Mode != 0o755|fs.ModeSetuid|fs.ModeSetgid {
		t.Errorf("a/one mode %v", e.Mode)
	}
	// The root is reported first, as ".".
	if len(r.deferred) == 0 || r.deferred[0].Path != "." || r.deferred[0].Kind != model.KindDir {
		t.Errorf("first deferred entry %+v, want the root", r.deferred[0])
	}
}

func TestWalkDirectoryBeforeItsFiles(t *testing.T) {
	src := testDir(t)
	for i := range 20 {
		for j := range 30 {
			mkfile(t, filepath.Join(src, fmt.Sprintf("d%d/e%d/f%d", i, i%3, j)), 1)
		}
	}
	// Also with batches spread over directories (spread.go), which hold
	// files back and hand them on in another order.
	for _, spread := range []bool{false, true} {
		var mu sync.Mutex
		seen := map[string]bool{}
		out := make(chan *model.Batch)
		decide := make(chan bool, 1)
		decide <- spread
		opt := Options{BatchFiles: 7, Spread: decide, Deferred: func(e model.Entry) {
			mu.Lock()
			seen[e.Path] = true
			mu.Unlock()
		}}
		go func() {
			_, err := Run(context.Background(), src, opt, out)
			if err != nil {
				t.Error(err)
			}
		}()
		files := 0
		for b := range out {
			mu.Lock()
			for _, e := range b.Entries {
				files++
				for d := e.Path; d != "."; {
					d = pathDir(d)
					if !seen[d] {
						t.Errorf("spread %v: batch %d holds %q before its directory %q was deferred", spread, b.ID, e.Path, d)
					}
				}
			}
			mu.Unlock()
		}
		if files != 20*30 {
			t.Errorf("spread %v: %d files, want %d", spread, files, 20*30)
		}
	}
}

func pathDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

func TestWalkHardlinks(t *testing.T) {
	src := testDir(t)
	outside := testDir(t)
	mkfile(t, filepath.Join(src, "a/orig"), 100)
	mkdir(t, filepath.Join(src, "b/c"))
	check(t, os.Link(filepath.Join(src, "a/orig"), filepath.Join(src, "b/second")))
	check(t, os.Link(filepath.Join(src, "a/orig"), filepath.Join(src, "b/c/third")))
	check(t, os.Link(filepath.Join(src, "a/orig"), filepath.Join(src, "a/fourth")))
	// A file whose only other name is outside the tree is a plain file.
	mkfile(t, filepath.Join(outside, "x"), 5)
	check(t, os.Link(filepath.Join(outside, "x"), filepath.Join(src, "b/lonely")))
	// A second, separate group.
	mkfile(t, filepath.Join(src, "g1"), 1)
	check(t, os.Link(filepath.Join(src, "g1"), filepath.Join(src, "b/c/g2")))

	for range 5 { // the first name depends on scheduling: try a few
		open := -1
		r := run(t, src, Options{Concurrency: 8, hooks: &testHooks{links: func(n int) { open = n }}})
		// Every group was met in full but b/lonely's, whose other name
		// is outside: only that inode is still remembered.
		if open != 1 {
			t.Errorf("%d hard-link sets still open at the end, want 1", open)
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		m := r.byPath(t)
		checkLinkGroup(t, m, "a/orig", "b/second", "b/c/third", "a/fourth")
		checkLinkGroup(t, m, "g1", "b/c/g2")
		if e := m["b/lonely"]; e.Kind != model.KindFile || e.Size != 5 {
			t.Errorf("b/lonely: %+v", e)
		}
		if r.stats.Hardlinks != 4 || r.stats.Files != 3 {
			t.Errorf("stats %+v", r.stats)
		}
	}
}

// checkLinkGroup checks that one of names, the names of one inode, is a
// regular file and every other a hard link to it.
func checkLinkGroup(t *testing.T, m map[string]model.Entry, names ...string) {
	t.Helper()
	var first string
	for _, n := range names {
		if m[n].Kind == model.KindFile {
			if first != "" {
				t.Errorf("both %q and %q are files", first, n)
			}
			first = n
		}
	}
	if first == "" {
		t.Fatalf("no name of %v is a file", names)
	}
	for _, n := range names {
		e := m[n]
		if n == first {
			if e.Size != 100 && e.Size != 1 {
				t.Errorf("%q: size %d", n, e.Size)
			}
			continue
		}
		if e.Kind != model.KindHardlink || e.Link != first {
			t.Errorf("%q: %s -> %q, want hardlink -> %q", n, e.Kind, e.Link, first)
		}
		if e.Ino != m[first].Ino || e.Dev != m[first].Dev {
			t.Errorf("%q: dev/ino differ from %q", n, first)
		}
	}
}

// TestWalkHardlinksBounded: two trees whose files are each other's hard
// links (two snapshots), with room for 50 open hard-link sets: no more
// than 50 are open at once, the names of the others wait on disk for the
// end of the walk, and every inode still comes out as one file and its
// hard links, every name once.
func TestWalkHardlinksBounded(t *testing.T) {
	src := testDir(t)
	outside := testDir(t)
	const n = 1500
	for i := range n {
		a := filepath.Join(src, fmt.Sprintf("a/d%d/f%04d", i%7, i))
		mkfile(t, a, 1)
		mkdir(t, filepath.Join(src, fmt.Sprintf("b/d%d", i%5)))
		check(t, os.Link(a, filepath.Join(src, fmt.Sprintf("b/d%d/f%04d", i%5, i))))
		if i%3 == 0 {
			check(t, os.Link(a, filepath.Join(src, fmt.Sprintf("c%04d", i))))
		}
	}
	mkfile(t, filepath.Join(outside, "x"), 100)
	check(t, os.Link(filepath.Join(outside, "x"), filepath.Join(src, "lonely")))
	for range 3 { // which names wait depends on scheduling: try a few
		peak := -1
		r := run(t, src, Options{Concurrency: 8, BatchFiles: 100, LinkMem: 50, SpillDir: t.TempDir(),
			hooks: &testHooks{linkPeak: func(p int) { peak = p }}})
		if r.err != nil || len(r.errs) > 0 {
			t.Fatal(r.err, r.errs)
		}
		if peak != 50 {
			// Far more sets are open at once without the bound.
			t.Errorf("%d hard-link sets open at once, want 50: the most, reached", peak)
		}
		m := r.byPath(t)
		for i := range n {
			names := []string{fmt.Sprintf("a/d%d/f%04d", i%7, i), fmt.Sprintf("b/d%d/f%04d", i%5, i)}
			if i%3 == 0 {
				names = append(names, fmt.Sprintf("c%04d", i))
			}
			checkLinkGroup(t, m, names...)
		}
		if e := m["lonely"]; e.Kind != model.KindFile || e.Size != 100 {
			t.Errorf("lonely: %+v", e)
		}
		if want := int64(n + (n+2)/3); r.stats.Hardlinks != want || r.stats.Files != n+1 {
			t.Errorf("stats %+v, want %d files and %d hard links", r.stats, n+1, want)
		}
	}
}

func TestWalkExclude(t *testing.T) {
	src := testDir(t)
	for _, n := range []string{
		"keep.txt", "x.tmp", "a/x.tmp", "a/keep",
		"cache/in", "a/cache/in", // dirs named cache
		"b/cache", // a file named cache
		"build/out", "src/build/out",
		"a/b/c.txt", "z/a/b/c.txt",
	} {
		mkfile(t, filepath.Join(src, n), 1)
	}
	mkfile(t, filepath.Join(src, "keep.tmp"), 1)
	if err := os.Symlink("a", filepath.Join(src, "cachelink")); err != nil {
		t.Fatal(err)
	}
	opt := Options{Filter: rules(t, "+ keep.tmp", "- *.tmp", "- cache/", "- /build", "- a/b/c.txt", "- *link")}
	r := run(t, src, opt)
	if r.err != nil {
		t.Fatal(r.err)
	}
	m := r.byPath(t)
	for _, n := range []string{".", "keep.txt", "keep.tmp", "a", "a/keep", "b", "b/cache", "src", "src/build", "src/build/out", "a/b", "z", "z/a", "z/a/b"} {
		if _, ok := m[n]; !ok {
			t.Errorf("%q missing", n)
		}
	}
	for _, n := range []string{"x.tmp", "a/x.tmp", "cache", "cache/in", "a/cache", "a/cache/in", "build", "build/out", "a/b/c.txt", "z/a/b/c.txt", "cachelink"} {
		if _, ok := m[n]; ok {
			t.Errorf("%q not excluded", n)
		}
	}
	// Excluded: x.tmp a/x.tmp cache a/cache build a/b/c.txt z/a/b/c.txt
	// cachelink; not what is under them.
	if r.stats.Excluded != 8 {
		t.Errorf("Excluded = %d, want 8", r.stats.Excluded)
	}
}

// rules builds filter rules for Options.Filter.
func rules(t *testing.T, rules ...string) *filter.Rules {
	t.Helper()
	r := new(filter.Rules)
	for _, s := range rules {
		if err := r.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// Directories are walked for the files an include lets through: the rsync
// idiom of --include '*/' --include PAT --exclude '*'.
func TestWalkIncludeOnly(t *testing.T) {
	src := testDir(t)
	for _, n := range []string{"a.c", "a.h", "d/b.c", "d/e/c.c", "d/e/x.o", "f/g.txt"} {
		mkfile(t, filepath.Join(src, n), 1)
	}
	r := run(t, src, Options{Filter: rules(t, "+ */", "+ *.c", "- *")})
	if r.err != nil {
		t.Fatal(r.err)
	}
	var files []string
	for _, e := range r.files() {
		files = append(files, e.Path)
	}
	slices.Sort(files)
	if want := []string{"a.c", "d/b.c", "d/e/c.c"}; !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	if r.stats.Dirs != 4 || r.stats.Excluded != 3 {
		t.Errorf("stats %+v, want 4 dirs (. d d/e f) and 3 excluded", r.stats)
	}
}

// A single-file source is filtered by its base name, as rsync does.
func TestWalkSingleFileExcluded(t *testing.T) {
	src := filepath.Join(testDir(t), "x.tmp")
	mkfile(t, src, 1)
	r := run(t, src, Options{Filter: rules(t, "- /*.tmp")})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.files()) != 0 || len(r.deferred) != 0 || r.stats.Excluded != 1 {
		t.Errorf("files %v, deferred %v, stats %+v", r.files(), r.deferred, r.stats)
	}
	r = run(t, src, Options{Filter: rules(t, "- *.o")})
	if len(r.files()) != 1 || r.stats.Excluded != 0 {
		t.Errorf("not excluded: files %v, stats %+v", r.files(), r.stats)
	}
}

func TestWalkExcludedDirNotRead(t *testing.T) {
	src := testDir(t)
	mkfile(t, filepath.Join(src, "skip/deep/f"), 1)
	mkfile(t, filepath.Join(src, "go/f"), 1)
	var opened []string
	var mu sync.Mutex
	opt := Options{Filter: rules(t, "- skip"), hooks: &testHooks{openDir: func(rel string) error {
		mu.Lock()
		opened = append(opened, rel)
		mu.Unlock()
		return nil
	}}}
	r := run(t, src, opt)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, o := range opened {
		if strings.HasPrefix(o, "skip") {
			t.Errorf("opened excluded %q", o)
		}
	}
	if len(opened) != 1 || opened[0] != "go" {
		t.Errorf("opened %q, want [go]", opened)
	}
}

func TestWalkUnreadableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any directory; TestWalkInjectedErrors covers the path")
	}
	src := testDir(t)
	mkfile(t, filepath.Join(src, "ok/f"), 1)
	mkfile(t, filepath.Join(src, "locked/f"), 1)
	mkfile(t, filepath.Join(src, "z/f"), 1)
	check(t, os.Chmod(filepath.Join(src, "locked"), 0))
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "locked"), 0o755) })
	r := run(t, src, Options{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	err := r.errs["locked"]
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("error for locked: %v", err)
	}
	if len(r.errs) != 1 {
		t.Errorf("errors: %v", r.errs)
	}
	m := r.byPath(t)
	for _, n := range []string{"ok/f", "z/f", "locked"} {
		if _, ok := m[n]; !ok {
			t.Errorf("%q missing", n)
		}
	}
}

func TestWalkInjectedErrors(t *testing.T) {
	src := testDir(t)
	for _, d := range []string{"a", "b", "c", "d"} {
		for i := range 3 {
			mkfile(t, filepath.Join(src, d, fmt.Sprint("f", i)), 1)
		}
	}
	var calls sync.Map
	opt := Options{hooks: &testHooks{
		openDir: func(rel string) error {
			if rel == "a" {
				return syscall.EACCES
			}
			return nil
		},
		readDir: func(rel string) error {
			if rel == "b" {
				return syscall.EIO
			}
			if rel == "d" { // the second readdir of d fails
				if _, again := calls.LoadOrStore(rel, true); again {
					return syscall.EIO
				}
			}
			return nil
		},
		lstat: func(rel string) error {
			if rel == "c/f1" {
				return syscall.ENOENT
			}
			return nil
		},
	}}
	r := run(t, src, opt)
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantErr := map[string]error{"a": fs.ErrPermission, "b": syscall.EIO, "c/f1": fs.ErrNotExist, "d": syscall.EIO}
	for p, want := range wantErr {
		err := r.errs[p]
		if !errors.Is(err, want) {
			t.Errorf("error for %q: %v, want %v", p, err, want)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Path, src) {
			t.Errorf("error for %q does not name the full path: %v", p, err)
		}
	}
	if len(r.errs) != len(wantErr) {
		t.Errorf("errors %v", r.errs)
	}
	m := r.byPath(t)
	for _, n := range []string{".", "a", "b", "c", "d", "c/f0", "c/f2", "d/f0", "d/f1", "d/f2"} {
		if _, ok := m[n]; !ok {
			t.Errorf("%q missing", n)
		}
	}
	for _, n := range []string{"a/f0", "b/f0", "c/f1"} {
		if _, ok := m[n]; ok {
			t.Errorf("%q reported", n)
		}
	}
	if r.stats.Errors != 4 {
		t.Errorf("Errors = %d", r.stats.Errors)
	}
}

// Devices, FIFOs and sockets are skipped with a warning naming the flag
// that copies them; asked for (Devices, Specials: -D), each is a deferred
// entry of its kind, a device with its number, and skipped if its own
// flag is not given.
func TestWalkSpecialFiles(t *testing.T) {
	src := testDir(t)
	mkfile(t, filepath.Join(src, "d/regular"), 1)
	check(t, unix.Mkfifo(filepath.Join(src, "d/fifo"), 0o640))
	const specials, devices = "(use -D to copy special files)", "(use -D to copy devices)"
	wantWarn := map[string]string{"d/fifo": "skipping FIFO " + specials}
	wantKind := map[string]model.Kind{"d/fifo": model.KindFIFO}
	// A Unix socket path must be short: listen from inside the directory.
	sockDir := filepath.Join(src, "d")
	if len(sockDir) < 100 {
		l, err := net.Listen("unix", filepath.Join(sockDir, "sock"))
		check(t, err)
		defer l.Close()
		wantWarn["d/sock"] = "skipping socket " + specials
		wantKind["d/sock"] = model.KindSocket
	}
	if os.Geteuid() == 0 {
		check(t, unix.Mknod(filepath.Join(src, "d/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		check(t, unix.Mknod(filepath.Join(src, "d/loop"), unix.S_IFBLK|0o660, int(unix.Mkdev(7, 1000))))
		wantWarn["d/null"] = "skipping device " + devices
		wantWarn["d/loop"] = "skipping device " + devices
		wantKind["d/null"], wantKind["d/loop"] = model.KindCharDevice, model.KindBlockDevice
	}
	wantRdev := map[string]uint64{"d/null": model.Mkdev(1, 3), "d/loop": model.Mkdev(7, 1000)}
	for _, tc := range []struct {
		name              string
		devices, specials bool
	}{{"neither", false, false}, {"devices", true, false}, {"specials", false, true}, {"both", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, src, Options{Devices: tc.devices, Specials: tc.specials})
			if r.err != nil {
				t.Fatal(r.err)
			}
			m := r.byPath(t)
			warns := map[string]string{}
			for p, k := range wantKind {
				e, ok := m[p]
				if asked := k.IsDevice() && tc.devices || k.IsSpecial() && tc.specials; !asked {
					warns[p] = wantWarn[p]
					if ok {
						t.Errorf("%s reported as a %s, not asked for", p, e.Kind)
					}
					continue
				}
				fi, err := os.Lstat(filepath.Join(src, p))
				check(t, err)
				switch {
				case !ok:
					t.Errorf("%s not reported", p)
				case e.Kind != k || e.Rdev != wantRdev[p] || e.Mode != fi.Mode().Perm() || e.MTime != fi.ModTime().UnixNano():
					t.Errorf("%s: %s %d:%d mode %v mtime %d, want %s %d:%d %v %d", p, e.Kind, e.Major(), e.Minor(), e.Mode, e.MTime,
						k, wantRdev[p]>>32, uint32(wantRdev[p]), fi.Mode().Perm(), fi.ModTime().UnixNano())
				}
			}
			if fmt.Sprint(r.warns) != fmt.Sprint(warns) {
				t.Errorf("warnings %v, want %v", r.warns, warns)
			}
			if r.stats.Skipped != int64(len(warns)) || r.stats.Specials != int64(len(wantKind)-len(warns)) {
				t.Errorf("Skipped = %d, Specials = %d; want %d, %d", r.stats.Skipped, r.stats.Specials, len(warns), len(wantKind)-len(warns))
			}
			if len(m) != 3+len(wantKind)-len(warns) { // . d d/regular
				t.Errorf("entries %v", m)
			}
		})
	}
}

func TestWalkBatchLimits(t *testing.T) {
	src := testDir(t)
	// 5,000 equal files in directories of uneven sizes.
	n := 0
	for d := 0; n < 5000; d++ {
		for i := 0; i < 37*(d%5+1) && n < 5000; i++ {
			mkfile(t, filepath.Join(src, fmt.Sprintf("d%02d/f%04d", d, i)), 10)
			n++
		}
	}
	r := run(t, src, Options{BatchFiles: 100})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.batches) != 50 {
		t.Errorf("%d batches, want 50", len(r.batches))
	}
	for _, b := range r.batches[:len(r.batches)-1] {
		if len(b.Entries) != 100 || b.Bytes != 1000 {
			t.Errorf("batch %d: %d files, %d bytes", b.ID, len(b.Entries), b.Bytes)
		}
	}
	if r.stats.Files != 5000 || r.stats.Bytes != 50000 {
		t.Errorf("stats %+v", r.stats)
	}
	// The same by bytes: cost 10+90 per file, 1000 per batch: 10 files.
	r = run(t, src, Options{BatchBytes: 1000, FileCost: 90, BatchFiles: 1000})
	for _, b := range r.batches[:len(r.batches)-1] {
		if len(b.Entries) != 10 {
			t.Errorf("batch %d: %d files", b.ID, len(b.Entries))
		}
	}
	if len(r.batches) != 500 {
		t.Errorf("%d batches, want 500", len(r.batches))
	}
}

func TestWalkKeepsDirectoriesTogether(t *testing.T) {
	src := testDir(t)
	for d := range 12 {
		for i := range 100 {
			mkfile(t, filepath.Join(src, fmt.Sprintf("d%02d/f%03d", d, i)), 10)
		}
	}
	r := run(t, src, Options{BatchFiles: 100, Concurrency: 8})
	// Each directory's 100 files come in one chunk, so each batch holds one directory.
	for _, b := range r.batches {
		dirs := map[string]bool{}
		for _, e := range b.Entries {
			dirs[pathDir(e.Path)] = true
		}
		if len(dirs) != 1 {
			t.Errorf("batch %d spans %d directories", b.ID, len(dirs))
		}
	}
}

func TestWalkLargeFileAlone(t *testing.T) {
	src := testDir(t)
	mkfile(t, filepath.Join(src, "big"), 5000)
	for i := range 10 {
		mkfile(t, filepath.Join(src, fmt.Sprint("s", i)), 10)
	}
	r := run(t, src, Options{BatchBytes: 1000, FileCost: 1})
	found := false
	for _, b := range r.batches {
		for _, e := range b.Entries {
			if e.Path == "big" {
				found = true
				if len(b.Entries) != 1 {
					t.Errorf("big shares batch %d with %d others", b.ID, len(b.Entries)-1)
				}
			}
		}
	}
	if !found {
		t.Error("big not sent")
	}
}

// TestWalkStreams checks that batches leave while the walk is running: with
// nobody draining out, the walk cannot finish; it finishes once out is drained.
func TestWalkStreams(t *testing.T) {
	shapes := map[string]func(src string){
		"wide": func(src string) {
			for d := range 200 {
				for i := range 20 {
					mkfile(t, filepath.Join(src, fmt.Sprintf("d%03d/f%02d", d, i)), 1)
				}
			}
		},
		// One flat directory: it must be read in chunks, not all at once.
		"flat": func(src string) {
			for i := range 20000 {
				check(t, os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), nil, 0o644))
			}
		},
	}
	for name, mk := range shapes {
		t.Run(name, func(t *testing.T) {
			src := testDir(t)
			mk(src)
			walked := make(chan struct{})
			opt := Options{BatchFiles: 10, Concurrency: 4, hooks: &testHooks{walkDone: func() { close(walked) }}}
			out := make(chan *model.Batch)
			done := make(chan error, 1)
			go func() {
				_, err := Run(context.Background(), src, opt, out)
				done <- err
			}()
			first := <-out
			if first.ID != 1 {
				t.Errorf("first batch has ID %d", first.ID)
			}
			select {
			case <-walked:
				t.Fatal("the walk finished while out was not drained")
			case <-time.After(200 * time.Millisecond):
			}
			n := 1
			for range out {
				n++
			}
			select {
			case <-walked:
			default:
				t.Error("walkDone not called")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n != 20000/10 && n != 4000/10 {
				t.Errorf("%d batches", n)
			}
		})
	}
}

func TestWalkCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	src := testDir(t)
	for d := range 50 {
		for i := range 40 {
			mkfile(t, filepath.Join(src, fmt.Sprintf("d%02d/e/f%02d", d, i)), 1)
		}
	}
	for _, after := range []int{0, 1, 5} { // cancel after receiving this many batches
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan *model.Batch)
		done := make(chan error, 1)
		var deferredAfterReturn sync.Mutex
		returned := false
		opt := Options{BatchFiles: 10, Deferred: func(model.Entry) {
			deferredAfterReturn.Lock()
			defer deferredAfterReturn.Unlock()
			if returned {
				t.Error("Deferred called after Run returned")
			}
		}}
		go func() {
			_, err := Run(ctx, src, opt, out)
			deferredAfterReturn.Lock()
			returned = true
			deferredAfterReturn.Unlock()
			done <- err
		}()
		for range after {
			<-out
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("after %d batches: Run returned %v", after, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("after %d batches: Run did not return after cancel", after)
		}
		for range out { // closed, perhaps after a batch already in flight... never: out is unbuffered
		}
	}
	// Cancelled before it starts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := make(chan *model.Batch, 1000)
	if _, err := Run(ctx, src, Options{}, out); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Run returned %v", err)
	}
}

func TestWalkSingleFile(t *testing.T) {
	dir := testDir(t)
	f := filepath.Join(dir, "only file.bin")
	mkfile(t, f, 1234)
	r := run(t, f, Options{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.batches) != 1 || len(r.batches[0].Entries) != 1 {
		t.Fatalf("batches %v", r.batches)
	}
	e := r.batches[0].Entries[0]
	if e.Path != "only file.bin" || e.Size != 1234 || e.Kind != model.KindFile || e.Mode != 0o644 {
		t.Errorf("entry %+v", e)
	}
	if len(r.deferred) != 0 {
		t.Errorf("deferred %v", r.deferred)
	}

	l := filepath.Join(dir, "lnk")
	check(t, os.Symlink("only file.bin", l))
	r = run(t, l, Options{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.batches) != 0 || len(r.deferred) != 1 {
		t.Fatalf("batches %v, deferred %v", r.batches, r.deferred)
	}
	if e := r.deferred[0]; e.Path != "lnk" || e.Kind != model.KindSymlink || e.Link != "only file.bin" {
		t.Errorf("entry %+v", e)
	}
}

func TestWalkMissingSource(t *testing.T) {
	out := make(chan *model.Batch)
	_, err := Run(context.Background(), filepath.Join(testDir(t), "nope"), Options{}, out)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Run on a missing source: %v", err)
	}
	if _, ok := <-out; ok {
		t.Error("out not closed")
	}
}

func TestWalkEmptyDir(t *testing.T) {
	r := run(t, testDir(t), Options{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.batches) != 0 || len(r.deferred) != 1 || r.deferred[0].Path != "." {
		t.Errorf("batches %v deferred %v", r.batches, r.deferred)
	}
}

func BenchmarkWalk(b *testing.B) {
	src := testDir(b)
	// 200 directories of 100 files, 20 directories of 20 subdirectories of 10.
	for d := range 200 {
		dir := filepath.Join(src, fmt.Sprintf("flat%03d", d))
		mkdir(b, dir)
		for i := range 100 {
			check(b, os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte("data"), 0o644))
		}
	}
	for d := range 20 {
		for s := range 20 {
			dir := filepath.Join(src, fmt.Sprintf("deep%02d/s%02d", d, s))
			mkdir(b, dir)
			for i := range 10 {
				check(b, os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o644))
			}
		}
	}
	var files, runs int64
	for b.Loop() {
		runs++
		out := make(chan *model.Batch, 16)
		go func() {
			for range out {
			}
		}()
		st, err := Run(context.Background(), src, Options{}, out)
		if err != nil {
			b.Fatal(err)
		}
		files = st.Files
	}
	b.ReportMetric(float64(files*runs)/b.Elapsed().Seconds(), "files/s")
}

// TestWalkAllocsPerFile: the walk allocates once for each file it reports,
// its path (no DirEntry, no name apart from the path, no C string for the
// lstat): what a walk costs whatever the tree's size is left out, the
// difference between a directory of 2n files and one of n.
func TestWalkAllocsPerFile(t *testing.T) {
	const n = 500
	walk := func(k int) float64 {
		src := testDir(t)
		for i := range k {
			check(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("f%05d", i)), nil, 0o644))
		}
		out := make(chan *model.Batch, 64)
		return testing.AllocsPerRun(5, func() {
			done := make(chan struct{})
			go func() {
				for range out {
				}
				close(done)
			}()
			if _, err := Run(context.Background(), src, Options{}, out); err != nil {
				t.Fatal(err)
			}
			<-done
			out = make(chan *model.Batch, 64)
		})
	}
	a := (walk(2*n) - walk(n)) / n
	t.Logf("%.2f allocations per file", a)
	if a > 1.5 {
		t.Errorf("%.2f allocations per file walked, want 1", a)
	}
}
