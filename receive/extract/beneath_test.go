package extract_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// openModes runs f with directories opened by openat2, and again by the
// walk a component at a time used where openat2 is missing.
func openModes(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		defer extract.ForceWalk()()
		f(t)
	})
}

// TestSymlinkedDirectoryRefused: a directory of DEST on the way to an
// entry that is a symlink (to another directory of DEST, or out of it),
// whether the entry's own directory or one above it, is never written
// through: each entry below it fails, naming the symlink, as a refusal the
// job counts (not a failure of the stream), and the directories it names
// are left as they were. Entries elsewhere land.
func TestSymlinkedDirectoryRefused(t *testing.T) {
	openModes(t, func(t *testing.T) {
		s := newSandbox(t)
		for p, data := range map[string]string{"b/f": "keep", "b/c/f": "kept"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(s.root, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(s.root, p), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("b", filepath.Join(s.root, "a")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(s.outside, filepath.Join(s.root, "o")); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, filepath.Join(s.root, "b"))
		r := s.open(t, extract.Options{})

		entries := []model.Entry{fileE("a/f", 4), fileE("a/c/f", 4), fileE("o/f", 4), fileE("o/c/f", 4),
			fileE("ok/deep/er/f", 4)}
		entries[4].Nlink = 2    // a hard-link target below
		want := map[int]string{ // the refusals, by entry
			0: filepath.Join(s.root, "a") + ": is a symlink, not a directory; nothing written through it",
			1: filepath.Join(s.root, "a") + ": is a symlink, not a directory; nothing written through it",
			2: filepath.Join(s.root, "o") + ": is a symlink, not a directory; nothing written through it",
			3: filepath.Join(s.root, "o") + ": is a symlink, not a directory; nothing written through it",
		}
		tx := r.Begin(entries)
		for i := range entries {
			if err := tx.Write(i, strings.NewReader("new!")); err != nil {
				t.Fatalf("write %s: %v (a refused entry must not fail the stream)", entries[i].Path, err)
			}
		}
		ack := tx.Commit(1, nil)
		checkRefusals(t, entries, ack, want)
		if ack.Files != 1 {
			t.Errorf("ack counts %d files, want 1", ack.Files)
		}
		checkFile(t, s.root, fileE("ok/deep/er/f", 4), "new!")

		// Nor do directories, symlinks or hard links of a final batch go
		// through it.
		final := []model.Entry{symE("a/l", "x"), symE("o/l", "x"), hardE("a/h", "ok/deep/er/f"),
			hardE("o/h", "ok/deep/er/f"), dirE("a/c", 0o700), dirE("o/c", 0o700)}
		tx = r.Begin(final)
		for i := range final {
			tx.Apply(i)
		}
		ack = tx.Commit(2, nil)
		refused := func(d string) string {
			return filepath.Join(s.root, d) + ": is a symlink, not a directory; nothing written through it"
		}
		checkRefusals(t, final, ack, map[int]string{0: refused("a"), 1: refused("o"), 2: refused("a"), 3: refused("o"),
			4: refused("a"), 5: refused("o")})

		if after := snapshot(t, filepath.Join(s.root, "b")); after != before {
			t.Errorf("b changed through the symlink a:\n%s\nwas\n%s", after, before)
		}
		if fi, err := os.Lstat(filepath.Join(s.root, "a")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("a is no longer the symlink: %v %v", fi, err)
		}
		s.check(t)
	})
}

// checkRefusals checks that ack holds exactly the errors want (by entry
// index: a text the message must hold), refusals each.
func checkRefusals(t *testing.T, entries []model.Entry, ack *wire.BatchAck, want map[int]string) {
	t.Helper()
	got := map[int]bool{}
	for _, e := range ack.Errors {
		got[e.Index] = true
		w, ok := want[e.Index]
		switch {
		case !ok:
			t.Errorf("%s: unexpected error %q", entries[e.Index].Path, e.Msg)
		case !strings.Contains(e.Msg, w):
			t.Errorf("%s: error %q does not say %q", entries[e.Index].Path, e.Msg, w)
		case e.Code != wire.CodeInvalid:
			t.Errorf("%s: error %q has code %d, want %d (refused)", entries[e.Index].Path, e.Msg, e.Code, wire.CodeInvalid)
		}
	}
	for i := range want {
		if !got[i] {
			t.Errorf("%s: no error, want %q", entries[i].Path, want[i])
		}
	}
}

// snapshot describes every name under dir (type, mode, size, mtime and
// content, symlinks not followed), and dir's own mtime.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
