package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestVerboseBatchNames: -v names each batch as people count them (#1,
// #2, ...; #17.2 a part split off #17), never by its wire id; and without a
// terminal it draws no progress line in place.
func TestVerboseBatchNames(t *testing.T) {
	bin := testbin.Build(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Small(src, 2000, 20, 512); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-v", "--journal", "none", "--batch-files", "100", "-j", "2", src, filepath.Join(dir, "dst")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if named := regexp.MustCompile(`(?m)^bulkmove: batch #\d{1,4}(\.\d{1,4})? on stream \d: \d+ files, `).FindAll(out, -1); len(named) < 10 {
		t.Errorf("%d batches named, want the 20 or so of 2,000 files by 100:\n%s", len(named), out)
	}
	if other := regexp.MustCompile(`batch #s\d`).Find(out); other != nil {
		t.Errorf("a part of a split batch not named after the walk's batch (#17.2): %q\n%s", other, out)
	}
	if raw := regexp.MustCompile(`batch #?\d{6,}`).Find(out); raw != nil {
		t.Errorf("a wire id shown: %q\n%s", raw, out)
	}
	if regexp.MustCompile("[\r\x1b]").Match(out) {
		t.Errorf("escape codes or carriage returns in -v output to a pipe:\n%q", out)
	}
}
