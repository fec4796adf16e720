package extract_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestOpenBeneath: the destination is made and opened beneath the root
// one component at a time, with no symlink followed, not even one that
// stays inside the root; a receiver opened there keeps writing in that
// directory after its name leads elsewhere.
func TestOpenBeneath(t *testing.T) {
	dir := t.TempDir()
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "other"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("other", filepath.Join(root, "in"))
	os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644)
	r, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct{ rel, want string }{
		{"out", "out: a symlink"},
		{"out/x", "out: a symlink"},
		{"in", "in: a symlink"},
		{"in/x/y", "in: a symlink"},
		{"file/x", "file: not a directory"},
		{"../x", "is not beneath"},
	} {
		d, err := extract.OpenBeneath(r, tc.rel)
		if err == nil {
			d.Close()
			t.Errorf("%s: opened, want %q", tc.rel, tc.want)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.rel, err, tc.want)
		} else if strings.Contains(tc.want, "symlink") && !errors.Is(err, extract.ErrSymlinkBeneath) {
			t.Errorf("%s: %v is not ErrSymlinkBeneath", tc.rel, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("made %d entries outside the root", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "other")); len(ents) != 0 {
		t.Errorf("made %d entries through the symlink inside the root", len(ents))
	}

	// Made where missing; the receiver stays in the directory it opened.
	recv, err := extract.OpenAt(r, "a/b/c", extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", 4)}}
	mustReceive(t, recv, m, tarOf(t, 1, tf("f", "data")))
	if b, err := os.ReadFile(filepath.Join(root, "moved/b/c/f")); err != nil || string(b) != "data" {
		t.Errorf("the file is not in the directory the receiver opened: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("wrote %d entries outside the root", len(ents))
	}
	if d, err := extract.OpenBeneath(r, "a/b/c"); err == nil || !errors.Is(err, extract.ErrSymlinkBeneath) {
		if d != nil {
			d.Close()
		}
		t.Errorf("a swapped for a symlink: %v, want ErrSymlinkBeneath", err)
	}
}
