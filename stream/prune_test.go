package stream_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// pruneDest makes a destination holding the empty files names and a
// receiver for it.
func pruneDest(t *testing.T, names ...string) (string, *extract.Receiver) {
	t.Helper()
	dst := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dst, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recv, err := extract.Open(dst, extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Close() })
	return dst, recv
}

// TestApplyPruneInParts: a directory's names in three requests prune
// nothing until the last, which removes exactly what none of them named;
// a continuation that names another directory is a protocol error.
func TestApplyPruneInParts(t *testing.T) {
	dst, recv := pruneDest(t, "a", "b", "c", "gone1", "gone2")
	var p stream.Pruning
	defer p.Close()
	parts := [][]string{{"c"}, {"a", "only-at-the-source"}, {"b"}}
	for i, names := range parts {
		req := &wire.PruneRequest{ID: uint64(i + 1), More: i < len(parts)-1, Dirs: []wire.PruneDir{{Dir: ".", Names: names}}}
		res, err := stream.ApplyPrune(recv, &p, req, nil)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("part %d: %v %v", i, err, res.Errors)
		}
		if req.More && len(res.Removed) > 0 {
			t.Fatalf("part %d of 3 removed %v", i+1, res.Removed)
		}
		if !req.More && (len(res.Removed) != 2 || res.Removed[0].Path != "gone1" || res.Removed[1].Path != "gone2") {
			t.Fatalf("the last part removed %v, want gone1 and gone2", res.Removed)
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 4, More: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"a"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 5, Dirs: []wire.PruneDir{{Dir: "other"}}}, nil)
	if !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("a continuation of . naming another directory: %v, want a protocol error", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "b")); err != nil {
		t.Errorf("b went on a broken continuation: %v", err)
	}
}

// TestApplyPruneKeepFails: when the names of a part cannot be kept (no
// room on disk for them), the last part reports it and deletes nothing:
// not pruning by the later parts' names alone.
func TestApplyPruneKeepFails(t *testing.T) {
	dst, recv := pruneDest(t, "a", "d")
	defer func(m int) { extract.PruneMem = m }(extract.PruneMem)
	extract.PruneMem = 3 // the first part does not fit, DEST's two names do
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	var p stream.Pruning
	defer p.Close()
	if _, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 1, More: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"a", "b", "c", "x"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 2, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"d"}}}}, nil)
	if err != nil || len(res.Errors) != 1 || len(res.Removed) != 0 {
		t.Fatalf("removed %v, errors %q, %v; want nothing removed and one error", res.Removed, res.Errors, err)
	}
	for _, n := range []string{"a", "d"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestApplyPruneResultsInParts: removing more than PruneResultMax entries
// answers in several results, each but the last with More, together
// naming every entry removed once.
func TestApplyPruneResultsInParts(t *testing.T) {
	const n = 2*stream.PruneResultMax + 10
	names := []string{"keep"}
	for i := range n {
		names = append(names, fmt.Sprintf("x%05d", i))
	}
	dst, recv := pruneDest(t, names...)
	var p stream.Pruning
	defer p.Close()
	var results []*wire.PruneResult
	last, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 9, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"keep"}}}},
		func(r *wire.PruneResult) error {
			results = append(results, r)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, last)
	seen := map[string]bool{}
	for i, r := range results {
		if r.ID != 9 || r.More != (i < len(results)-1) || len(r.Removed) > stream.PruneResultMax {
			t.Errorf("result %d of %d: id %d, more %v, %d removed", i+1, len(results), r.ID, r.More, len(r.Removed))
		}
		for _, e := range r.Removed {
			if seen[e.Path] {
				t.Errorf("%s removed twice", e.Path)
			}
			seen[e.Path] = true
		}
	}
	if len(results) != 3 || len(seen) != n {
		t.Errorf("%d results naming %d entries, want 3 naming %d", len(results), len(seen), n)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 1 || ents[0].Name() != "keep" {
		t.Errorf("left %d entries, want keep alone", len(ents))
	}
}

// TestApplyPruneCountAndLimit: a CountOnly request removes and lists
// nothing but counts what it examined and would remove (what the --delete
// guard decides by); a Limit removes that many, all the request's
// directories together, and counts the rest as held.
func TestApplyPruneCountAndLimit(t *testing.T) {
	dst, recv := pruneDest(t, "keep", "x1", "x2", "x3")
	if err := os.MkdirAll(filepath.Join(dst, "d", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"d/keep", "d/y/z"} {
		if err := os.WriteFile(filepath.Join(dst, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []wire.PruneDir{{Dir: ".", Names: []string{"keep", "d"}}, {Dir: "d", Names: []string{"keep"}}}
	var p stream.Pruning
	defer p.Close()
	res, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 1, CountOnly: true, Dirs: dirs}, nil)
	// Examined: keep x1 x2 x3 d, then d/keep d/y d/y/z.
	if err != nil || len(res.Errors) > 0 || len(res.Removed) != 0 || res.Examined != 8 || res.Count != 5 || res.Held != 0 {
		t.Fatalf("count: %+v, %v; want 8 examined, 5 to remove, none listed", res, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "x1")); err != nil {
		t.Fatalf("a count removed x1: %v", err)
	}
	res, err = stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 2, Limit: 2, Dirs: dirs}, nil)
	if err != nil || len(res.Errors) > 0 || len(res.Removed) != 2 || res.Count != 2 || res.Held != 3 {
		t.Fatalf("limit 2: %+v, %v; want 2 removed, 3 held", res, err)
	}
	left := 0
	for _, n := range []string{"x1", "x2", "x3", "d/y", "d/y/z"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			left++
		}
	}
	if left != 3 {
		t.Errorf("%d of the 5 extra entries left after a limit of 2, want 3", left)
	}
}
