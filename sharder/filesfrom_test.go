//go:build linux

package sharder

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
)

// TestFilesFromEverything: listing every path of a walk (in any order)
// reports exactly what the walk reports.
func TestFilesFromEverything(t *testing.T) {
	src := shardTree(t)
	whole := run(t, src, Options{})
	check(t, whole.err)
	want := whole.byPath(t)
	paths := slices.Sorted(maps.Keys(want))
	// Reverse order: every file comes before its directory, which is
	// then implied first and not reported again when listed.
	slices.Reverse(paths)
	for _, nul := range []bool{false, true} {
		sep := "\n"
		if nul {
			sep = "\x00"
		}
		r := run(t, src, Options{FilesFrom: strings.NewReader(strings.Join(paths, sep) + sep), FilesFromNUL: nul})
		check(t, r.err)
		if len(r.errs) > 0 {
			t.Fatalf("errors: %v", r.errs)
		}
		got := r.byPath(t)
		for p, w := range want {
			e, ok := got[p]
			if !ok {
				t.Errorf("%q not reported", p)
				continue
			}
			if e.Kind != w.Kind && !(e.Nlink > 1 && (e.Kind == model.KindFile || e.Kind == model.KindHardlink)) {
				t.Errorf("%q: %s, the walk says %s", p, e.Kind, w.Kind)
			}
			if e.Size != w.Size && e.Kind == w.Kind || e.MTime != w.MTime || e.Mode != w.Mode {
				t.Errorf("%q: %+v, the walk says %+v", p, e, w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d entries, the walk has %d", len(got), len(want))
		}
	}
}

// TestFilesFromRules: implied directories, no recursion, comments, blank
// lines, leading slashes, duplicates, names outside the source, missing
// names.
func TestFilesFromRules(t *testing.T) {
	src := testDir(t)
	mkfile(t, filepath.Join(src, "a/b/c/f"), 3)
	mkfile(t, filepath.Join(src, "a/x"), 1)
	mkfile(t, filepath.Join(src, "d/inside"), 1)
	mkfile(t, filepath.Join(src, "#hash"), 1)
	check(t, os.Symlink("a", filepath.Join(src, "ln")))
	list := strings.Join([]string{
		"a/b/c/f",
		"# a comment",
		"; another",
		"",
		"d/",
		"/a/x\r",
		"../etc/passwd",
		"missing/file",
		"a/b/c/f",
		"a//b",
		"ln",
		"ln/x", // through a symlink: never followed
		"./#hash",
	}, "\n")
	r := run(t, src, Options{FilesFrom: strings.NewReader(list)})
	check(t, r.err)
	got := map[string]model.Kind{}
	for p, e := range r.byPath(t) {
		got[p] = e.Kind
	}
	want := map[string]model.Kind{
		"a": model.KindDir, "a/b": model.KindDir, "a/b/c": model.KindDir, "a/b/c/f": model.KindFile,
		"d": model.KindDir, "a/x": model.KindFile, "ln": model.KindSymlink, "#hash": model.KindFile,
	}
	if !maps.Equal(got, want) {
		t.Errorf("reported %v\nwant %v", got, want)
	}
	for _, p := range []string{"../etc/passwd", "missing/file", "ln/x"} {
		if r.errs[p] == nil {
			t.Errorf("no error for %q (errors: %v)", p, r.errs)
		}
	}
	if len(r.errs) != 3 {
		t.Errorf("errors %v, want 3", r.errs)
	}
}

// TestFilesFromRoot: "." is the source directory's own entry.
func TestFilesFromRoot(t *testing.T) {
	src := testDir(t)
	mkfile(t, filepath.Join(src, "f"), 1)
	r := run(t, src, Options{FilesFrom: strings.NewReader(".\nf\n")})
	check(t, r.err)
	if len(r.deferred) != 1 || r.deferred[0].Path != "." || len(r.files()) != 1 {
		t.Errorf("deferred %v, files %v", r.deferred, r.files())
	}
	if _, err := Run(t.Context(), filepath.Join(src, "f"), Options{FilesFrom: strings.NewReader("f\n")}, make(chan *model.Batch, 1)); err == nil {
		t.Error("a list with a single-file source: no error")
	}
}

// TestFilesFromShards: a list split by shards covers what the whole list
// does, once.
func TestFilesFromShards(t *testing.T) {
	src := shardTree(t)
	whole := run(t, src, Options{})
	paths := slices.Sorted(maps.Keys(whole.byPath(t)))
	list := strings.Join(paths, "\n")
	seen := map[string]bool{}
	for i := range 3 {
		r := run(t, src, Options{FilesFrom: strings.NewReader(list), Shard: Shard{Index: i, Count: 3}})
		check(t, r.err)
		for p := range r.byPath(t) {
			if seen[p] {
				t.Errorf("%q twice", p)
			}
			seen[p] = true
		}
	}
	if len(seen) != len(paths) {
		t.Errorf("%d entries in 3 shards, %d listed", len(seen), len(paths))
	}
}
