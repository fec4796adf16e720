//go:build linux

package sharder

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/filter"
)

// mergeTree makes a tree of nested directories, files, and .rsync-filter
// files in some of them (seeded), for per-directory rules.
func mergeTree(t *testing.T, src string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 29))
	ruleSets := []string{
		"- *.o\n",
		"+ keep.o\n- *.o\n",
		"- /f1\n- d1/\n",
		"!\n- *.txt\n",
		"+ *.txt\n- f*\n",
		"- /d2/f0\n- **/d0/f2\n",
		"- .rsync-filter\n",
	}
	var mk func(dir string, depth int)
	mk = func(dir string, depth int) {
		for i := range 3 {
			mkfile(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), i)
		}
		mkfile(t, filepath.Join(dir, "x.o"), 1)
		mkfile(t, filepath.Join(dir, "keep.o"), 1)
		mkfile(t, filepath.Join(dir, "a.txt"), 1)
		if rng.IntN(3) == 0 {
			if err := os.WriteFile(filepath.Join(dir, ".rsync-filter"), []byte(ruleSets[rng.IntN(len(ruleSets))]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if depth == 0 {
			return
		}
		for i := range 3 {
			mk(filepath.Join(dir, fmt.Sprintf("d%d", i)), depth-1)
		}
	}
	mk(src, 4)
}

// rsyncList is what rsync, given args, sends of src: paths relative to src,
// without the trailing '/' of directories.
func rsyncList(t *testing.T, src string, args ...string) []string {
	t.Helper()
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not on PATH: the comparison needs it")
	}
	out, err := exec.Command(rsync, append(append([]string{"-a", "--dry-run", "--out-format=%n"}, args...), src+"/", t.TempDir()+"/")...).CombinedOutput()
	if err != nil {
		t.Fatalf("rsync: %v\n%s", err, out)
	}
	var l []string
	for _, s := range strings.Split(string(out), "\n") {
		if s != "" && s != "./" {
			l = append(l, strings.TrimSuffix(s, "/"))
		}
	}
	slices.Sort(l)
	return l
}

// The parallel walk applies each directory's .rsync-filter to its subtree
// as rsync -F does, with the directories still to read spilled to disk,
// and holds no directory's rules once it is done.
func TestWalkPerDirectoryRules(t *testing.T) {
	src := testDir(t)
	mergeTree(t, src)
	for _, ff := range [][]string{{"-F"}, {"-FF"}, {"-F", "--exclude", "f0"}} {
		want := rsyncList(t, src, ff...)
		r := new(filter.Rules)
		for _, a := range ff {
			switch a {
			case "-FF":
				check(t, r.Add("dir-merge /.rsync-filter"))
				check(t, r.Add("- .rsync-filter"))
			case "-F":
				check(t, r.Add("dir-merge /.rsync-filter"))
			case "--exclude":
			default:
				check(t, r.AddExclude(a))
			}
		}
		held := -1
		r2 := run(t, src, Options{Filter: r, Concurrency: 8, DirMem: 4, SpillDir: t.TempDir(), hooks: &testHooks{scopes: func(n int) { held = n }}})
		if r2.err != nil {
			t.Fatal(r2.err)
		}
		var got []string
		for p := range r2.byPath(t) {
			if p != "." {
				got = append(got, p)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%q: the walk and rsync differ:\n only rsync: %q\n only the walk: %q", ff, minus(want, got), minus(got, want))
		}
		if held != 0 {
			t.Errorf("%q: at the end the walk holds the rules of %d directories", ff, held)
		}

		// The source side of --delete lists the same.
		var listed []string
		err := ListDirs(context.Background(), src, r, Links{}, func(dir string, names []string, more bool) error {
			for _, n := range names {
				if dir != "." {
					n = dir + "/" + n
				}
				listed = append(listed, n)
			}
			return nil
		})
		check(t, err)
		slices.Sort(listed)
		if !slices.Equal(listed, want) {
			t.Errorf("%q: ListDirs and rsync differ:\n only rsync: %q\n only ListDirs: %q", ff, minus(want, listed), minus(listed, want))
		}
	}
}

// minus returns what of a is not in b.
func minus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[s] = true
	}
	return slices.DeleteFunc(slices.Clone(a), func(s string) bool { return in[s] })
}

// A .rsync-filter that cannot be parsed stops the walk, with an error
// naming the file and the line, as rsync stops (it might have excluded
// what is left).
func TestWalkBadPerDirectoryRules(t *testing.T) {
	src := testDir(t)
	mergeTree(t, src)
	bad := filepath.Join(src, "d1", "d2", ".rsync-filter")
	check(t, os.WriteFile(bad, []byte("- ok\n+ fine\nbogus rule\n"), 0o644))
	r := run(t, src, Options{Filter: rules(t, "dir-merge /.rsync-filter"), Concurrency: 4})
	want := bad + " line 3: filter rule \"bogus rule\": unknown rule type"
	if r.err == nil || !strings.Contains(r.err.Error(), want) {
		t.Fatalf("walk error %v, want one saying %s", r.err, want)
	}
	err := ListDirs(context.Background(), src, rules(t, "dir-merge /.rsync-filter"), Links{}, func(string, []string, bool) error { return nil })
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ListDirs error %v, want one saying %s", err, want)
	}
}
