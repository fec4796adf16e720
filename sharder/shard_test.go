//go:build linux

package sharder

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/model"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"0/1", Shard{0, 1}, true},
		{"3/16", Shard{3, 16}, true},
		{"15/16", Shard{15, 16}, true},
		{"16/16", Shard{}, false},
		{"-1/4", Shard{}, false},
		{"1/0", Shard{}, false},
		{"1", Shard{}, false},
		{"a/b", Shard{}, false},
	} {
		got, err := ParseShard(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in && tc.in != "0/1" {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func TestShardOfStable(t *testing.T) {
	// FNV-1a 64 of the path: these values must never change, or shards
	// of one job run by two versions would overlap.
	for _, tc := range []struct {
		dir  string
		n    int
		want int
	}{
		{".", 7, int(0xaf63a34c86018bb1 % 7)}, // hash of "."
		{"a", 16, int(0xaf63dc4c8601ec8c % 16)},
		{"x/y", 1, 0},
	} {
		if got := ShardOf(tc.dir, tc.n); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.dir, tc.n, got, tc.want)
		}
	}
}

// shardTree builds a mixed tree (files, directories, symlinks, hard links,
// empty directories) plus a wide flat directory.
func shardTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(testDir(t), "src")
	check(t, gentree.Mixed(src, 3000, 7))
	check(t, gentree.Small(filepath.Join(src, "flat"), 3000, 40, 10))
	return src
}

// TestShardUnionDisjoint: for N in {1, 2, 7, 16}, the N shards of a tree
// report every entry of the unsharded walk exactly once; each entry is in
// the shard of its directory (itself for a directory, its parent for
// anything else).
func TestShardUnionDisjoint(t *testing.T) {
	src := shardTree(t)
	whole := run(t, src, Options{})
	check(t, whole.err)
	if len(whole.errs) > 0 {
		t.Fatalf("errors: %v", whole.errs)
	}
	want := whole.byPath(t)
	for _, n := range []int{1, 2, 7, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			seen := map[string]int{} // path -> shard
			var files []int64
			for i := range n {
				r := run(t, src, Options{Shard: Shard{Index: i, Count: n}})
				check(t, r.err)
				if len(r.errs) > 0 {
					t.Fatalf("shard %d: errors %v", i, r.errs)
				}
				files = append(files, r.stats.Files+r.stats.Hardlinks+r.stats.Symlinks)
				for p, e := range r.byPath(t) {
					if s, dup := seen[p]; dup {
						t.Errorf("%q in shards %d and %d", p, s, i)
					}
					seen[p] = i
					w, ok := want[p]
					if !ok {
						t.Errorf("shard %d: %q is not in the tree", i, p)
						continue
					}
					// A hard link's first name may be in another shard: then
					// this shard has a file of its own.
					if e.Kind != w.Kind && !(e.Nlink > 1 && (e.Kind == model.KindFile || e.Kind == model.KindHardlink)) {
						t.Errorf("%q: kind %s in shard %d, %s in the whole walk", p, e.Kind, i, w.Kind)
					}
					dir := pathDir(p)
					if e.Kind == model.KindDir {
						dir = p
					}
					if got := ShardOf(dir, n); got != i {
						t.Errorf("%q (%s) in shard %d, its directory %q is shard %d's", p, e.Kind, i, dir, got)
					}
				}
			}
			if len(seen) != len(want) {
				for p := range want {
					if _, ok := seen[p]; !ok {
						t.Errorf("%q is in no shard", p)
					}
				}
			}
			t.Logf("N=%d: non-directory entries per shard %v (max/mean %.2f)", n, files, maxOverMean(files))
		})
	}
}

func maxOverMean(v []int64) float64 {
	var sum int64
	for _, x := range v {
		sum += x
	}
	if sum == 0 {
		return 1
	}
	return float64(slices.Max(v)) * float64(len(v)) / float64(sum)
}

// TestShardSkipsOthersLstat: a shard lstats only what it owns.
func TestShardSkipsOthersLstat(t *testing.T) {
	src := testDir(t)
	for d := range 20 {
		for f := range 5 {
			mkfile(t, filepath.Join(src, fmt.Sprintf("d%02d", d), fmt.Sprintf("f%d", f)), 1)
		}
	}
	var lstats []string
	opt := Options{Shard: Shard{Index: 1, Count: 3}, Concurrency: 1}
	opt.hooks = &testHooks{lstat: func(rel string) error { lstats = append(lstats, rel); return nil }}
	r := run(t, src, opt)
	check(t, r.err)
	for _, p := range lstats {
		dir := pathDir(p)
		if !opt.Shard.OwnsDir(dir) && !opt.Shard.OwnsDir(p) {
			t.Errorf("lstat of %q, which shard 1/3 does not own", p)
		}
	}
	if int64(len(lstats)) != r.stats.Files+r.stats.Dirs-boolInt(opt.Shard.OwnsDir(".")) {
		t.Errorf("%d lstats for %d files and %d directories", len(lstats), r.stats.Files, r.stats.Dirs)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestShardSingleFile: a single-file source belongs to the shard of ".".
func TestShardSingleFile(t *testing.T) {
	src := filepath.Join(testDir(t), "one")
	mkfile(t, src, 3)
	n := 5
	total := 0
	for i := range n {
		r := run(t, src, Options{Shard: Shard{Index: i, Count: n}})
		check(t, r.err)
		total += len(r.files())
		if len(r.files()) > 0 && i != ShardOf(".", n) {
			t.Errorf("shard %d has the file, want shard %d", i, ShardOf(".", n))
		}
	}
	if total != 1 {
		t.Errorf("%d shards have the file", total)
	}
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
}
