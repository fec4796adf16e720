package extract_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
)

// TestDirInTheWayOfAFile: a non-empty directory where a file lands is
// replaced, with all it holds, only with Delete; without it the file
// fails once, naming the path and --delete, and its bytes are not counted
// as landed. An empty directory is replaced either way.
func TestDirInTheWayOfAFile(t *testing.T) {
	for _, del := range []bool{false, true} {
		s := newSandbox(t)
		mkTree(t, s.root, "full/sub/g", "full/h")
		if err := os.Mkdir(filepath.Join(s.root, "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := s.open(t, extract.Options{Delete: del})
		entries := []model.Entry{fileE("full", 5), fileE("empty", 3)}
		tx := r.Begin(entries)
		for i, body := range []string{"fffff", "eee"} {
			if err := tx.Write(i, strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
		}
		ack := tx.Commit(1, nil)
		if got, err := os.ReadFile(filepath.Join(s.root, "empty")); err != nil || string(got) != "eee" {
			t.Errorf("delete=%v: empty: %q %v; want the file", del, got, err)
		}
		got, err := os.ReadFile(filepath.Join(s.root, "full"))
		if del {
			if err != nil || string(got) != "fffff" || len(ack.Errors) != 0 || ack.Files != 2 || ack.Bytes != 8 {
				t.Errorf("delete: full: %q %v; ack %d files, %d bytes, errors %v; want the file, 2 files, 8 bytes", got, err, ack.Files, ack.Bytes, ack.Errors)
			}
		} else {
			want := "full: a non-empty directory is in the way of a file; rerun with --delete to replace it"
			if len(ack.Errors) != 1 || ack.Errors[0].Msg != want || ack.Files != 1 || ack.Bytes != 3 {
				t.Errorf("ack %d files, %d bytes, errors %v; want 1 file, 3 bytes and the error %q", ack.Files, ack.Bytes, ack.Errors, want)
			}
			if _, err := os.Stat(filepath.Join(s.root, "full/sub/g")); err != nil {
				t.Errorf("without Delete: %v", err)
			}
		}
		s.check(t)
	}
}

// TestDirInTheWayOfASymlink: a symlink over a non-empty directory, as a
// file over one.
func TestDirInTheWayOfASymlink(t *testing.T) {
	for _, del := range []bool{false, true} {
		s := newSandbox(t)
		mkTree(t, s.root, "d/sub/g")
		r := s.open(t, extract.Options{Delete: del})
		tx := r.Begin([]model.Entry{symE("d", "target")})
		tx.Apply(0)
		ack := tx.Commit(1, nil)
		target, err := os.Readlink(filepath.Join(s.root, "d"))
		if del && (err != nil || target != "target" || len(ack.Errors) != 0) {
			t.Errorf("delete: d -> %q %v; errors %v", target, err, ack.Errors)
		}
		if !del && (err == nil || len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "d: a non-empty directory is in the way of a symlink; rerun with --delete")) {
			t.Errorf("without Delete: d -> %q; errors %v", target, ack.Errors)
		}
		s.check(t)
	}
}

// TestSwappedDirFails: a directory this receiver opened earlier in the
// run and that is a symlink now was swapped meanwhile, not changed at the
// source: writing into it fails, naming the file; nothing is written
// through the link and the link stays (a type change found at the first
// open is replaced instead: TestDirInTheWayOfAFile).
func TestSwappedDirFails(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{Delete: true})
	tx := r.Begin([]model.Entry{fileE("d/a", 1)})
	if err := tx.Write(0, strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	if ack := tx.Commit(1, nil); len(ack.Errors) != 0 {
		t.Fatal(ack.Errors)
	}
	if err := os.Rename(filepath.Join(s.root, "d"), filepath.Join(s.root, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.outside, filepath.Join(s.root, "d")); err != nil {
		t.Fatal(err)
	}
	tx = r.Begin([]model.Entry{fileE("d/b", 1)})
	if err := tx.Write(0, strings.NewReader("b")); err != nil {
		t.Fatal(err)
	}
	if ack := tx.Commit(2, nil); len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "d/b") || ack.Files != 0 || ack.Bytes != 0 {
		t.Errorf("ack: %d files, %d bytes, errors %v; want the one error naming d/b", ack.Files, ack.Bytes, ack.Errors)
	}
	if fi, err := os.Lstat(filepath.Join(s.root, "d")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("d: %v %v; want the symlink left alone", fi, err)
	}
	s.check(t)
}
