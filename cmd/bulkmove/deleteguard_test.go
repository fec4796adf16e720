package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// TestDeleteCeiling: a deleting pass that removes more than the guard's
// ceiling (half of what the count examined: SRC or DEST changed between
// the count and the pass) stops at its next result, with errOverCeiling,
// rather than going on to the end.
func TestDeleteCeiling(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	const extra = 3 * stream.PruneResultMax
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "keep"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range extra {
		if err := os.WriteFile(filepath.Join(dst, fmt.Sprintf("x%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recv, err := extract.Open(dst, extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	j := &job{flags: moveFlags{rules: new(filter.Rules)}, stdout: io.Discard, stderr: io.Discard, src: src, dst: dst}
	removed := 0
	_, err = j.prunePass(context.Background(), []stream.Conn{&stream.Local{Recv: recv}}, plan{walkRoot: src, dstRoot: dst},
		pruneMode{ceiling: 100}, func(r *wire.PruneResult) { removed += len(r.Removed) })
	if !errors.Is(err, errOverCeiling) {
		t.Fatalf("prune past the ceiling: %v, want errOverCeiling", err)
	}
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if removed > stream.PruneResultMax || len(ents) != 1+extra-removed {
		t.Errorf("%d removed (%d names left of %d), want the pass stopped at its first result of %d", removed, len(ents), 1+extra, stream.PruneResultMax)
	}
}
