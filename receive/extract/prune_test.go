package extract_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
)

// mkTree creates files (names ending in '/' are directories) under root.
func mkTree(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, n)
		if strings.HasSuffix(n, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func removedPaths(rs []extract.Removed) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	slices.Sort(out)
	return out
}

func TestPrune(t *testing.T) {
	for _, dry := range []bool{false, true} {
		t.Run(map[bool]string{false: "delete", true: "dry-run"}[dry], func(t *testing.T) {
			s := newSandbox(t)
			mkTree(t, s.root, "keep.txt", "extra.txt", "old/a", "old/deep/b", "sub/keep", "sub/gone")
			mkTree(t, s.outside, "victim/file")
			// An extra symlink to a directory outside: removed as a link,
			// what it points at untouched.
			if err := os.Symlink(filepath.Join(s.outside, "victim"), filepath.Join(s.root, "link")); err != nil {
				t.Fatal(err)
			}
			r := s.open(t, extract.Options{})
			got, err := r.Prune(".", extract.NewKeep("keep.txt", "sub"), nil, dry)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"extra.txt", "link", "old", "old/a", "old/deep", "old/deep/b"}; !slices.Equal(removedPaths(got), want) {
				t.Errorf("removed %q, want %q", removedPaths(got), want)
			}
			got, err = r.Prune("sub", extract.NewKeep("keep"), nil, dry)
			if err != nil || !slices.Equal(removedPaths(got), []string{"sub/gone"}) {
				t.Errorf("sub: removed %q, %v; want sub/gone", removedPaths(got), err)
			}
			for _, p := range []string{"extra.txt", "link", "old", "sub/gone"} {
				if exists(filepath.Join(s.root, p)) == !dry {
					t.Errorf("%s: exists=%v after a prune with dry-run=%v", p, !dry, dry)
				}
			}
			for _, p := range []string{"keep.txt", "sub/keep"} {
				if !exists(filepath.Join(s.root, p)) {
					t.Errorf("%s was deleted, but the source has it", p)
				}
			}
			if !exists(filepath.Join(s.outside, "victim/file")) {
				t.Errorf("a file outside the root was deleted through a symlink")
			}
		})
	}
}

// TestPruneProtected: protected entries stay, and so do the directories
// that hold them; their unprotected neighbours go.
func TestPruneProtected(t *testing.T) {
	s := newSandbox(t)
	mkTree(t, s.root, "a.log", "a.txt", "old/b.log", "old/b.txt", "old/deep/c.txt")
	r := s.open(t, extract.Options{})
	protect := func(p string, isDir bool) bool { return strings.HasSuffix(p, ".log") }
	got, err := r.Prune(".", nil, protect, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.txt", "old/b.txt", "old/deep", "old/deep/c.txt"}; !slices.Equal(removedPaths(got), want) {
		t.Errorf("removed %q, want %q", removedPaths(got), want)
	}
	for _, p := range []string{"a.log", "old/b.log"} {
		if !exists(filepath.Join(s.root, p)) {
			t.Errorf("protected %s was deleted", p)
		}
	}
	if exists(filepath.Join(s.root, "old/deep")) {
		t.Errorf("old/deep, with nothing protected in it, is still there")
	}
}

// TestPruneRefusesSymlinkedDir: a directory that is a symlink at the
// destination is not listed through (that would delete in its target).
func TestPruneRefusesSymlinkedDir(t *testing.T) {
	s := newSandbox(t)
	mkTree(t, s.root, "real/precious")
	if err := os.Symlink("real", filepath.Join(s.root, "d")); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, extract.Options{})
	got, err := r.Prune("d", nil, nil, false)
	if err == nil || len(got) != 0 {
		t.Errorf("prune through a symlinked directory: removed %q, err %v; want an error and nothing removed", removedPaths(got), err)
	}
	if !exists(filepath.Join(s.root, "real/precious")) {
		t.Errorf("deleted through a symlinked directory")
	}
	for _, bad := range []string{"../x", "/etc", "a/../../b"} {
		if _, err := r.Prune(bad, nil, nil, false); err == nil {
			t.Errorf("Prune(%q): no error", bad)
		}
	}
	s.check(t)
}

// TestSweepStaleTemps: temporary files an interrupted run left behind are
// removed when a later run writes into their directory; a fresh one (a
// concurrent run's) stays, though it already has its source's old mtime.
func TestSweepStaleTemps(t *testing.T) {
	defer extract.SetStaleTemp(300 * time.Millisecond)()
	s := newSandbox(t)
	mkTree(t, s.root, "d/.bulkmove.tmp.123.abcd.1", "d/keep")
	time.Sleep(400 * time.Millisecond) // an interrupted run's: untouched since
	// A concurrent run's, being written: it has its source's mtime, two
	// hours old, but was changed just now.
	mkTree(t, s.root, "d/.bulkmove.tmp.456.beef.2")
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(s.root, "d/.bulkmove.tmp.456.beef.2"), old, old)
	r := s.open(t, extract.Options{NamedTemps: true}) // where named temporaries are used
	e := fileE("d/new", 3)
	tx := r.Begin([]model.Entry{e})
	if err := tx.Write(0, strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	tx.Commit(1, nil)
	r.Close() // sweeps go on aside: done when the receiver closes
	if exists(filepath.Join(s.root, "d/.bulkmove.tmp.123.abcd.1")) {
		t.Errorf("a stale temporary file is still there")
	}
	if !exists(filepath.Join(s.root, "d/.bulkmove.tmp.456.beef.2")) {
		t.Errorf("a fresh temporary file (a concurrent run's) was removed")
	}
	if !exists(filepath.Join(s.root, "d/keep")) || !exists(filepath.Join(s.root, "d/new")) {
		t.Errorf("other files are missing")
	}
}

// TestPruneSpilled: a directory of more names than Prune holds in memory,
// and a Keep given in parts out of order, both past PruneMem and so on
// disk: exactly the names Keep does not hold go, whatever their type.
func TestPruneSpilled(t *testing.T) {
	defer func(m int) { extract.PruneMem = m }(extract.PruneMem)
	extract.PruneMem = 50
	s := newSandbox(t)
	var want, keepNames []string
	isDir := map[string]bool{}
	for i := range 1500 {
		name := fmt.Sprintf("n%04d", (i*7919)%1500) // not in name order
		switch i % 3 {
		case 0:
			mkTree(t, s.root, name)
		case 1:
			mkTree(t, s.root, name+"/", name+"/inside")
			isDir[name] = true
		case 2:
			if err := os.Symlink("n0000", filepath.Join(s.root, name)); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 == 0 {
			want = append(want, name)
		} else {
			keepNames = append(keepNames, name)
		}
	}
	keepNames = append(keepNames, "only-at-the-source", "a-also", "zz-too")
	slices.Reverse(keepNames)
	keep := extract.NewKeep(keepNames[:700]...)
	defer keep.Close()
	for _, part := range [][]string{keepNames[700:1000], keepNames[1000:]} {
		if err := keep.Add(part...); err != nil {
			t.Fatal(err)
		}
	}
	if !keep.Spilled() {
		t.Fatal("1,203 names with room for 50 in memory: none went to disk")
	}
	r := s.open(t, extract.Options{})
	got, err := r.Prune(".", keep, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	var wantPaths []string
	for _, n := range want {
		if isDir[n] {
			wantPaths = append(wantPaths, n+"/inside") // a directory after what it held
		}
		wantPaths = append(wantPaths, n)
	}
	var paths []string
	for _, rm := range got {
		paths = append(paths, rm.Path)
	}
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("removed %d names (%.5q...), want %d (%.5q...), in name order", len(paths), paths, len(wantPaths), wantPaths)
	}
	ents, err := os.ReadDir(s.root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1500-len(want) {
		t.Errorf("%d names left, want %d", len(ents), 1500-len(want))
	}
	for _, e := range ents {
		if slices.Contains(want, e.Name()) {
			t.Errorf("%s is still there", e.Name())
		}
	}
}
