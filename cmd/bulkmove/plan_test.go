package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/sharder"
)

// walkAll lists every entry of src (path -> size; -1 for what is not a
// regular file) with the sharder.
func walkAll(t *testing.T, src string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	out := make(chan *model.Batch, 4)
	opt := sharder.Options{Deferred: func(e model.Entry) { m[e.Path] = -1 }}
	done := make(chan struct{})
	var files []model.Entry
	go func() {
		defer close(done)
		for b := range out {
			files = append(files, b.Entries...)
		}
	}()
	if _, err := sharder.Run(context.Background(), src, opt, out); err != nil {
		t.Fatal(err)
	}
	<-done
	for _, e := range files {
		m[e.Path] = e.Size
	}
	return m
}

// readPart returns the paths a part file lists.
func readPart(t *testing.T, name string, nul bool) []string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	sep := "\n"
	if nul {
		sep = "\x00"
	}
	ps := strings.Split(strings.TrimSuffix(string(b), sep), sep)
	for i, p := range ps {
		ps[i] = strings.TrimPrefix(p, "./")
	}
	return ps
}

// TestPlanBalanced: the parts of a plan of the mixed tree (20,000 files)
// list every entry exactly once, and are within 10% of the mean in bytes
// and in entries.
func TestPlanBalanced(t *testing.T) {
	root := shmDir(t)
	src := filepath.Join(root, "src")
	if err := gentree.Mixed(src, 20000, 1); err != nil {
		t.Fatal(err)
	}
	want := walkAll(t, src)
	for _, tc := range []struct {
		parts int
		nul   bool
	}{{1, false}, {4, true}, {16, false}} {
		t.Run(fmt.Sprint(tc.parts), func(t *testing.T) {
			out := filepath.Join(root, fmt.Sprintf("plan%d", tc.parts))
			args := []string{"plan", src, "--parts", fmt.Sprint(tc.parts), "-o", out}
			if tc.nul {
				args = append(args, "-0")
			}
			var stderr bytes.Buffer
			if code := run(args, nil, os.Stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			seen := map[string]int{}
			var bytesPer, entriesPer []int64
			for i := 1; i <= tc.parts; i++ {
				var b int64
				ps := readPart(t, filepath.Join(out, fmt.Sprintf("part-%04d", i)), tc.nul)
				for _, p := range ps {
					if j, dup := seen[p]; dup {
						t.Errorf("%q in part %d and %d", p, j, i)
					}
					seen[p] = i
					size, ok := want[p]
					if !ok {
						t.Errorf("part %d lists %q, which is not in the tree", i, p)
					}
					b += max(size, 0)
				}
				bytesPer = append(bytesPer, b)
				entriesPer = append(entriesPer, int64(len(ps)))
			}
			for p := range want {
				if _, ok := seen[p]; !ok {
					t.Errorf("%q is in no part", p)
				}
			}
			for what, v := range map[string][]int64{"bytes": bytesPer, "entries": entriesPer} {
				var sum int64
				for _, x := range v {
					sum += x
				}
				mean := float64(sum) / float64(len(v))
				// The largest part decides when N workers finish: within
				// 10% of the mean. A part may run light when a directory
				// piece does not divide (16 parts of 20,000 files, walked
				// in a different order each time): within 15%.
				if hi, lo := float64(slices.Max(v)), float64(slices.Min(v)); hi > 1.1*mean || lo < 0.85*mean {
					t.Errorf("%s per part %v: the largest not within 10%% of the mean %.0f, or the smallest not within 15%%", what, v, mean)
				}
				t.Logf("%d parts, %s: %v", tc.parts, what, v)
			}
			sum, err := os.ReadFile(filepath.Join(out, "summary.txt"))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"files        19900", "largest files", "largest directories", "[4KiB, 16KiB)"} {
				if !strings.Contains(string(sum), s) {
					t.Errorf("summary.txt lacks %q:\n%s", s, sum)
				}
			}
		})
	}
}

// TestShardDelete: with --shard, --delete prunes only the directories the
// shard owns.
func TestShardDelete(t *testing.T) {
	root := shmDir(t)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	t.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
	dirs := []string{"a", "b", "c", "d", "e", "f", "g"} // in shards 1 1 0 1 0 0 2 of 3
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, d, "keep"), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{src, dst}, nil, os.Stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(dst, d, "stray"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const n = 3
	for i := range n {
		stderr.Reset()
		if code := run([]string{"--shard", fmt.Sprintf("%d/%d", i, n), "--delete", src, dst}, nil, os.Stdout, &stderr); code != exitOK {
			t.Fatalf("shard %d: exit %d: %s", i, code, stderr.String())
		}
		for _, d := range dirs {
			_, err := os.Lstat(filepath.Join(dst, d, "stray"))
			gone := os.IsNotExist(err)
			if owner := sharder.ShardOf(d, n); gone != (owner <= i) {
				t.Errorf("after shard %d/%d: %s/stray gone %v, its directory is shard %d's", i, n, d, gone, owner)
			}
		}
	}
}

// TestScaleFlagErrors: what does not go together is a usage error.
func TestScaleFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--files-from", "x", "--delete", "a", "b"},
		{"-0", "a", "b"},
		{"--shard", "3/3", "a", "b"},
		{"--shard", "x", "a", "b"},
		{"plan", "a"},
		{"plan", "a", "--parts", "0", "-o", "x"},
	} {
		var stderr bytes.Buffer
		if code := run(args, nil, os.Stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (%s)", args, code, exitUsage, stderr.String())
		}
	}
}
