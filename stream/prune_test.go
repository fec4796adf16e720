package stream_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// TestApplyPruneInParts: a directory's names in three requests prune
// nothing until the last, which removes exactly what none of them named;
// a continuation that names another directory is a protocol error.
func TestApplyPruneInParts(t *testing.T) {
	dst := t.TempDir()
	for _, n := range []string{"a", "b", "c", "gone1", "gone2"} {
		if err := os.WriteFile(filepath.Join(dst, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recv, err := extract.Open(dst, extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	var p stream.Pruning
	defer p.Close()
	parts := [][]string{{"c"}, {"a", "only-at-the-source"}, {"b"}}
	for i, names := range parts {
		req := &wire.PruneRequest{ID: uint64(i + 1), More: i < len(parts)-1, Dirs: []wire.PruneDir{{Dir: ".", Names: names}}}
		res, err := stream.ApplyPrune(recv, &p, req)
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
	if _, err := stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 4, More: true, Dirs: []wire.PruneDir{{Dir: ".", Names: []string{"a"}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.ApplyPrune(recv, &p, &wire.PruneRequest{ID: 5, Dirs: []wire.PruneDir{{Dir: "other"}}})
	if !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("a continuation of . naming another directory: %v, want a protocol error", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "b")); err != nil {
		t.Errorf("b went on a broken continuation: %v", err)
	}
}
