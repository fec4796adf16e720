package gentree

import (
	"bytes"
	"compress/flate"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// tempDir is t.TempDir made removable even when a generated tree has
// read-only directories and the test does not run as root.
func tempDir(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	return dir
}

type stats struct {
	files, dirs, symlinks, multiLinked int
	bytes                              int64
	sizes                              map[int64]int
	perDir                             map[string]int // regular files per directory
}

func scan(t *testing.T, root string) stats {
	t.Helper()
	s := stats{sizes: map[int64]int{}, perDir: map[string]int{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			s.dirs++
		case d.Type()&fs.ModeSymlink != 0:
			s.symlinks++
		case d.Type().IsRegular():
			s.files++
			s.bytes += fi.Size()
			s.sizes[fi.Size()]++
			s.perDir[filepath.Dir(p)]++
			if nlink(fi) > 1 {
				s.multiLinked++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSmall(t *testing.T) {
	dir := filepath.Join(tempDir(t), "small")
	if err := Small(dir, 300, 7, 1001); err != nil {
		t.Fatal(err)
	}
	s := scan(t, dir)
	if s.files != 300 || s.dirs != 8 || s.sizes[1001] != 300 || s.symlinks != 0 {
		t.Errorf("got %d files (%v sizes), %d dirs (root included), %d symlinks; want 300 of 1001 bytes, 8, 0",
			s.files, s.sizes, s.dirs, s.symlinks)
	}
	for d, n := range s.perDir {
		if n != 300/7 && n != 300/7+1 {
			t.Errorf("%s has %d files, want %d or %d", d, n, 300/7, 300/7+1)
		}
	}
	other := filepath.Join(tempDir(t), "again")
	if err := Small(other, 300, 7, 1001); err != nil {
		t.Fatal(err)
	}
	treecmp.Equal(t, dir, other)

	// Every file has its own content.
	a, _ := os.ReadFile(filepath.Join(dir, "d0000", "f000000"))
	b, _ := os.ReadFile(filepath.Join(dir, "d0000", "f000001"))
	if len(a) != 1001 || bytes.Equal(a, b) {
		t.Errorf("files f000000 and f000001: %d bytes, equal %v", len(a), bytes.Equal(a, b))
	}
}

func TestSmallFlat(t *testing.T) {
	dir := tempDir(t)
	if err := Small(dir, 100, 0, 0); err != nil {
		t.Fatal(err)
	}
	s := scan(t, dir)
	if s.files != 100 || s.dirs != 1 || s.bytes != 0 {
		t.Errorf("got %d files, %d dirs, %d bytes; want 100, 1, 0", s.files, s.dirs, s.bytes)
	}
	if err := Small(dir, 1, 0, 0); err == nil {
		t.Error("no error when overwriting an existing name")
	}
}

func TestLarge(t *testing.T) {
	dir := filepath.Join(tempDir(t), "large")
	const size = 3<<20 + 5 // more than one buffer, not a multiple of 8
	if err := Large(dir, 3, size); err != nil {
		t.Fatal(err)
	}
	s := scan(t, dir)
	if s.files != 3 || s.sizes[size] != 3 {
		t.Fatalf("got %d files %v, want 3 of %d bytes", s.files, s.sizes, size)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "large-000.bin"))
	b, _ := os.ReadFile(filepath.Join(dir, "large-001.bin"))
	if bytes.Equal(a[:1<<20], b[:1<<20]) || bytes.Equal(a[:bufSize], a[bufSize:2*bufSize]) {
		t.Error("content repeats across files or buffers")
	}
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	w.Write(a)
	w.Close()
	if ratio := float64(z.Len()) / float64(len(a)); ratio < 0.99 {
		t.Errorf("content compresses to %.3f of its size", ratio)
	}
	other := filepath.Join(tempDir(t), "large")
	if err := Large(other, 3, size); err != nil {
		t.Fatal(err)
	}
	treecmp.Equal(t, dir, other)
}

func TestMixed(t *testing.T) {
	const n = 1000
	dir := filepath.Join(tempDir(t), "mixed")
	if err := Mixed(dir, n, 42); err != nil {
		t.Fatal(err)
	}
	s := scan(t, dir)
	if s.files != n {
		t.Errorf("%d regular files, want %d", s.files, n)
	}
	if s.dirs < n/mixedPerDir {
		t.Errorf("%d directories, want at least %d", s.dirs, n/mixedPerDir)
	}
	if s.symlinks < n/200 {
		t.Errorf("%d symlinks, want at least %d", s.symlinks, n/200)
	}
	if s.multiLinked < 2*(n/200) {
		t.Errorf("%d hard-linked names, want at least %d", s.multiLinked, 2*(n/200))
	}
	if s.sizes[0] == 0 {
		t.Error("no empty file")
	}

	var (
		spaces, nonASCII, longPath, emptyDirs, maxDepth int
		perms                                           = map[fs.FileMode]int{}
		nanos                                           = 0
	)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		name := d.Name()
		if strings.Contains(name, " ") {
			spaces++
		}
		if !isASCII(name) {
			nonASCII++
			if !utf8.ValidString(name) {
				t.Errorf("%q is not UTF-8", rel)
			}
		}
		if len(rel) > 255 {
			longPath++
		}
		if depth := strings.Count(rel, string(filepath.Separator)); depth > maxDepth {
			maxDepth = depth
		}
		fi, _ := d.Info()
		if fi.ModTime().Nanosecond()%1000 != 0 {
			nanos++
		}
		if d.IsDir() {
			if ents, _ := os.ReadDir(p); len(ents) == 0 {
				emptyDirs++
			}
		}
		if d.Type()&fs.ModeSymlink == 0 {
			perms[fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid|fs.ModeDir)]++
		}
		return nil
	})
	if spaces == 0 || nonASCII == 0 || longPath == 0 {
		t.Errorf("names with spaces %d, non-ASCII %d, paths over 255 bytes %d: want some of each", spaces, nonASCII, longPath)
	}
	if emptyDirs < 2+n/2000 {
		t.Errorf("%d empty directories, want at least %d", emptyDirs, 2+n/2000)
	}
	if maxDepth < 6 {
		t.Errorf("deepest name at depth %d, want 6 or more", maxDepth)
	}
	if nanos < s.files/2 {
		t.Errorf("only %d names have sub-microsecond mtimes", nanos)
	}
	for _, m := range []fs.FileMode{0o644, 0o600, 0o755, 0o444, fs.ModeDir | 0o755, fs.ModeDir | 0o555, fs.ModeDir | fs.ModeSticky | 0o777} {
		if perms[m] == 0 {
			t.Errorf("no name of mode %v", m)
		}
	}
	for m := range perms {
		if m&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%d names of mode %v: no setuid or setgid wanted", perms[m], m)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "readonly")); err != nil || len(ents) == 0 {
		t.Errorf("readonly directory: %d entries, %v", len(ents), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "empty-nested", "a", "b")); err != nil {
		t.Error(err)
	}

	// Same seed, same tree; another seed, another tree.
	again := filepath.Join(tempDir(t), "again")
	if err := Mixed(again, n, 42); err != nil {
		t.Fatal(err)
	}
	treecmp.Equal(t, dir, again, treecmp.Options{SymlinkMtime: true})
	other := filepath.Join(tempDir(t), "other")
	if err := Mixed(other, n, 43); err != nil {
		t.Fatal(err)
	}
	if diffs, err := treecmp.Compare(dir, other, treecmp.Options{}); err != nil || len(diffs) < 100 {
		t.Errorf("seeds 42 and 43: %d diffs (%v), want many", len(diffs), err)
	}
}

func TestMixedSmallN(t *testing.T) {
	for _, n := range []int{0, 10, 101} {
		dir := tempDir(t)
		if err := Mixed(dir, n, 1); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		s := scan(t, dir)
		if n >= 100 && s.files != n {
			t.Errorf("n=%d: %d regular files", n, s.files)
		}
		if s.files < MixedSpecialFiles || s.symlinks < 3 {
			t.Errorf("n=%d: %d files, %d symlinks", n, s.files, s.symlinks)
		}
	}
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func TestDirOfEven(t *testing.T) {
	for _, c := range [][2]int{{100, 7}, {1000, 1000}, {5, 3}, {100_000, 1000}, {10, 1}} {
		files, dirs := c[0], c[1]
		count := make([]int, dirs)
		prev := 0
		for i := range files {
			d := dirOfEven(i, files, dirs)
			if d < prev || d >= dirs {
				t.Fatalf("files=%d dirs=%d: file %d in dir %d after %d", files, dirs, i, d, prev)
			}
			prev = d
			count[d]++
		}
		for d, n := range count {
			if n < files/dirs || n > files/dirs+1 {
				t.Errorf("files=%d dirs=%d: dir %d has %d", files, dirs, d, n)
			}
		}
	}
}

func TestContentTail(t *testing.T) {
	// fill must give the same bytes whatever the chunking, for whole words.
	a := make([]byte, 64)
	newContent(7).fill(a)
	b := make([]byte, 64)
	c := newContent(7)
	c.fill(b[:24])
	c.fill(b[24:])
	if !bytes.Equal(a, b) {
		t.Error("content depends on chunking")
	}
}

func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// TestLinks: each subdirectory gets k symlinks to its files and k second
// names of them.
func TestLinks(t *testing.T) {
	dir := tempDir(t)
	if err := Small(dir, 20, 4, 0); err != nil {
		t.Fatal(err)
	}
	if err := Links(dir, 2); err != nil {
		t.Fatal(err)
	}
	s := scan(t, dir)
	if s.files != 28 || s.symlinks != 8 || s.multiLinked != 16 {
		t.Errorf("%d names of files, %d symlinks, %d names of hard-linked files; want 28 (20 files, 8 second names), 8, 16", s.files, s.symlinks, s.multiLinked)
	}
}

// flateRatio is b's deflated size (fastest level) over its size.
func flateRatio(b []byte) float64 {
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	w.Write(b)
	w.Close()
	return float64(z.Len()) / float64(len(b))
}

// TestMixedContent: a Mixed tree compresses as real trees do, by kind:
// text, records and code to well under half, media not at all; and a
// file's bytes do not depend on how the writer chunks them.
func TestMixedContent(t *testing.T) {
	const size = 300 << 10
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{"notes.txt", 0.2, 0.6}, {"README", 0.2, 0.6}, {"main.go", 0.15, 0.6}, {"app.log", 0.15, 0.6},
		{"rows.json", 0.1, 0.5}, {"rows.csv", 0.1, 0.5}, {"table.dat", 0.1, 0.5},
		{"photo.jpg", 0.99, 2}, {"blob.bin", 0.99, 2},
	} {
		whole := make([]byte, size)
		newFiller(contentOf(c.name), 7, size).fill(whole)
		if r := flateRatio(whole); r < c.min || r > c.max {
			t.Errorf("%s: compresses to %.2f, want %.2f to %.2f", c.name, r, c.min, c.max)
		}
		chunked := make([]byte, size)
		f := newFiller(contentOf(c.name), 7, size)
		for b, n := chunked, 1; len(b) > 0; n = n*3 + 1 {
			k := min(8*n, len(b)) // random content: whole words (TestContentTail)
			f.fill(b[:k])
			b = b[k:]
		}
		if !bytes.Equal(whole, chunked) {
			t.Errorf("%s: content depends on chunking", c.name)
		}
		other := make([]byte, size)
		newFiller(contentOf(c.name), 8, size).fill(other)
		if bytes.Equal(whole[:4096], other[:4096]) {
			t.Errorf("%s: seeds 7 and 8 make the same content", c.name)
		}
	}
	// A whole tree: text outweighs media, as in the trees people move.
	dir := filepath.Join(tempDir(t), "mixed")
	if err := Mixed(dir, 2000, 1); err != nil {
		t.Fatal(err)
	}
	var all []byte
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			all = append(all, b...)
		}
		return nil
	})
	if r := flateRatio(all); r < 0.25 || r > 0.65 {
		t.Errorf("the tree compresses to %.2f, want 0.25 to 0.65", r)
	}
}

// TestHalfAndRandom: Half and Random keep Mixed's layout; every file of a
// Half tree is a random first half and a second half that compresses to
// almost nothing (so the tree to about half), sizes 7/6 of Mixed's; nothing
// of a Random tree compresses; both are the same for the same seed.
func TestHalfAndRandom(t *testing.T) {
	const n = 600
	root := tempDir(t)
	mixed, half, half2, random := filepath.Join(root, "m"), filepath.Join(root, "h"), filepath.Join(root, "h2"), filepath.Join(root, "r")
	for _, g := range []struct {
		dir string
		gen func(string, int, uint64) error
	}{{mixed, Mixed}, {half, Half}, {half2, Half}, {random, Random}} {
		if err := g.gen(g.dir, n, 3); err != nil {
			t.Fatal(err)
		}
	}
	treecmp.Equal(t, half, half2, treecmp.Options{SymlinkMtime: true})
	sm, sh, sr := scan(t, mixed), scan(t, half), scan(t, random)
	if sh.files != sm.files || sh.dirs != sm.dirs || sh.symlinks != sm.symlinks || sr.files != sm.files || sr.dirs != sm.dirs {
		t.Errorf("layouts differ: mixed %d files %d dirs %d symlinks, half %d %d %d, random %d %d", sm.files, sm.dirs, sm.symlinks, sh.files, sh.dirs, sh.symlinks, sr.files, sr.dirs)
	}
	if sr.bytes != sm.bytes {
		t.Errorf("random tree has %d bytes, mixed %d: want the same sizes", sr.bytes, sm.bytes)
	}
	if r := float64(sh.bytes) / float64(sm.bytes); r < 1.15 || r > 1.18 {
		t.Errorf("half tree has %.3f× mixed's bytes, want 7/6", r)
	}
	contents := func(dir string, each func(b []byte)) []byte {
		var all []byte
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, _ := os.ReadFile(p)
				if each != nil {
					each(b)
				}
				all = append(all, b...)
			}
			return nil
		})
		return all
	}
	checked := 0
	all := contents(half, func(b []byte) {
		if len(b) < 64<<10 {
			return
		}
		checked++
		h := (len(b) + 1) / 2
		if r := flateRatio(b[:h]); r < 0.99 {
			t.Errorf("a %d-byte file's first half compresses to %.2f, want random", len(b), r)
		}
		if r := flateRatio(b[h:]); r > 0.05 {
			t.Errorf("a %d-byte file's second half compresses to %.2f, want almost nothing", len(b), r)
		}
	})
	if checked == 0 {
		t.Error("no file of 64 KiB or more to check")
	}
	// Deflate keeps each file's first line of text and a token per 258
	// bytes: about 0.56 here (zstd -1: 0.49 of a 20,000-file tree's tar).
	if r := flateRatio(all); r < 0.45 || r > 0.6 {
		t.Errorf("the half tree compresses to %.2f, want 0.45 to 0.6", r)
	}
	if r := flateRatio(contents(random, nil)); r < 0.99 {
		t.Errorf("the random tree compresses to %.2f, want nothing", r)
	}
}
