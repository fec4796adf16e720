package receive_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
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
	var p receive.Pruning
	defer p.Close()
	parts := [][]string{{"c"}, {"a", "only-at-the-source"}, {"b"}}
	for i, names := range parts {
		req := &wire.PruneRequest{ID: uint64(i + 1), More: i < len(parts)-1, Dirs: []wire.PruneDir{{Dir: ".", Names: names}}}
		res, err := receive.ApplyPrune(recv, &p, req, nil)
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
	if _, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 4, More: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"a"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 5, Dirs: []wire.PruneDir{{Dir: "other"}}}, nil)
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
	var p receive.Pruning
	defer p.Close()
	if _, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 1, More: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"a", "b", "c", "x"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 2, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"d"}}}}, nil)
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
	const n = 2*receive.PruneResultMax + 10
	names := []string{"keep"}
	for i := range n {
		names = append(names, fmt.Sprintf("x%05d", i))
	}
	dst, recv := pruneDest(t, names...)
	var p receive.Pruning
	defer p.Close()
	var results []*wire.PruneResult
	last, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 9, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"keep"}}}},
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
		if r.ID != 9 || r.More != (i < len(results)-1) || len(r.Removed) > receive.PruneResultMax {
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
	var p receive.Pruning
	defer p.Close()
	res, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 1, CountOnly: true, Dirs: dirs}, nil)
	// Examined: keep x1 x2 x3 d, then d/keep d/y d/y/z.
	if err != nil || len(res.Errors) > 0 || len(res.Removed) != 0 || res.Examined != 8 || res.Count != 5 || res.Held != 0 {
		t.Fatalf("count: %+v, %v; want 8 examined, 5 to remove, none listed", res, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "x1")); err != nil {
		t.Fatalf("a count removed x1: %v", err)
	}
	res, err = receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 2, Limit: 2, Dirs: dirs}, nil)
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

// TestApplyPruneCandidatesThenExact: a count with Candidates lists each
// entry of the directory that would go (not what lies inside one), with
// its kind; an Exact request naming them removes what is still there as
// counted, leaves alone an entry that became another kind, one that
// appeared since and one a rule protects, and lists nothing of the
// directory again.
func TestApplyPruneCandidatesThenExact(t *testing.T) {
	dst, recv := pruneDest(t, "keep", "x1", "x2", "became-dir", "prot")
	if err := os.MkdirAll(filepath.Join(dst, "xd", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "xd", "sub", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("keep", filepath.Join(dst, "xl")); err != nil {
		t.Fatal(err)
	}
	var p receive.Pruning
	defer p.Close()
	count := &wire.PruneRequest{ID: 1, CountOnly: true, Candidates: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"keep"}}}}
	res, err := receive.ApplyPrune(recv, &p, count, nil)
	// Would go: x1 x2 became-dir prot xl, xd and xd/sub and xd/sub/f.
	if err != nil || len(res.Errors) > 0 || res.Count != 8 {
		t.Fatalf("count: %+v, %v; want 8 to remove", res, err)
	}
	kinds := map[string]wire.EntryKind{}
	for _, e := range res.Removed {
		kinds[e.Path] = e.Kind
	}
	want := map[string]wire.EntryKind{"x1": wire.KindFile, "x2": wire.KindFile, "became-dir": wire.KindFile, "prot": wire.KindFile, "xd": wire.KindDir, "xl": wire.KindSymlink}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("candidates %v, want %v", kinds, want)
	}
	// Meanwhile: x2 goes, became-dir becomes a directory, x3 appears.
	for _, err := range []error{
		os.Remove(filepath.Join(dst, "x2")),
		os.Remove(filepath.Join(dst, "became-dir")),
		os.Mkdir(filepath.Join(dst, "became-dir"), 0o755),
		os.WriteFile(filepath.Join(dst, "x3"), nil, 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ex := wire.PruneDir{Dir: "."}
	for _, e := range res.Removed {
		ex.Names = append(ex.Names, e.Path)
		ex.Kinds = append(ex.Kinds, e.Kind)
	}
	res, err = receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 2, Exact: true, Rules: []string{"P /prot"}, Dirs: []wire.PruneDir{ex}}, nil)
	// Removed: x1, xl, and xd with what it holds.
	if err != nil || len(res.Errors) > 0 || res.Count != 5 {
		t.Fatalf("exact: %+v, %v; want 5 removed", res, err)
	}
	left, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if got := fmt.Sprint(names); got != "[became-dir keep prot x3]" {
		t.Errorf("left at DEST: %s, want [became-dir keep prot x3]", got)
	}
	// An Exact request inside a directory whose names continue is a
	// protocol error.
	if _, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 3, More: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"keep"}}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 4, Exact: true, Dirs: []wire.PruneDir{ex}}, nil); !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("an Exact request amid a continued directory: %v, want a protocol error", err)
	}
}

// TestApplyPruneExactSwappedDir: an Exact request for a directory that
// was swapped for a symlink (to another directory holding the same
// names) fails naming it and removes nothing through the link.
func TestApplyPruneExactSwappedDir(t *testing.T) {
	dst, recv := pruneDest(t)
	for _, d := range []string{"a", "other"} {
		if err := os.Mkdir(filepath.Join(dst, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, d, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dst, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", filepath.Join(dst, "a")); err != nil {
		t.Fatal(err)
	}
	var p receive.Pruning
	res, err := receive.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 1, Exact: true,
		Dirs: []wire.PruneDir{{Dir: "a", Names: []string{"x"}, Kinds: []wire.EntryKind{wire.KindFile}}}}, nil)
	if err != nil || len(res.Errors) != 1 || res.Count != 0 {
		t.Fatalf("exact in a swapped directory: %+v, %v; want one error, nothing removed", res, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "other", "x")); err != nil {
		t.Errorf("removed through the symlink: %v", err)
	}
	t.Logf("error: %s", res.Errors[0])
}

// TestApplyPrunePerDirectoryRules: a dir-merge rule has the receiver read
// the named file in each pruned directory of DEST and its parents (as
// rsync's receiver): what it excludes stays. A file it cannot parse stops
// that directory's prune with an error naming the file and line, quoting
// nothing of it; so does a symlink, not followed.
func TestApplyPrunePerDirectoryRules(t *testing.T) {
	dst, recv := pruneDest(t, ".rules", "top")
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dst, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".rules", "- *.keep\n")
	write("d/.rules", "- mine\n")
	for _, n := range []string{"d/a.keep", "d/mine", "d/gone", "d/e/mine", "d/e/b.keep", "d/e/gone", "f/.rules", "f/x"} {
		write(n, "")
	}
	write("f/.rules", "password=hunter2\n")
	os.MkdirAll(filepath.Join(dst, "g"), 0o755)
	os.Symlink("../d/.rules", filepath.Join(dst, "g", ".rules"))
	write("g/mine", "")
	var p receive.Pruning
	defer p.Close()
	req := &wire.PruneRequest{ID: 1, Rules: []string{": .rules"}, Dirs: []wire.PruneDir{
		{Dir: "d", Names: []string{".rules", "e"}}, {Dir: "d/e"}, {Dir: "f", Names: []string{".rules"}}, {Dir: "g"},
	}}
	res, err := receive.ApplyPrune(recv, &p, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"d/a.keep", "d/mine", "d/e/mine", "d/e/b.keep", "f/x", "g/mine"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, n := range []string{"d/gone", "d/e/gone"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			t.Errorf("%s is still there", n)
		}
	}
	errs := fmt.Sprint(res.Errors)
	if len(res.Errors) != 2 || !strings.Contains(errs, filepath.Join(dst, "f/.rules")+" line 1: not a filter rule") || strings.Contains(errs, "hunter2") ||
		!strings.Contains(errs, "g/.rules") {
		t.Errorf("errors %q, want one naming f/.rules line 1 without its content, and one for the symlink g/.rules", res.Errors)
	}
}
