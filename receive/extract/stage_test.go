package extract_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// stagingDirs lists the receiver's staging directories under root.
func stagingDirs(t *testing.T, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, extract.TempPrefix+"*.stage"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStaging: where named temporaries are used and the filesystem is slow
// (many files at once), files are written in staging directories and linked
// into place (replacing what is there), the staging directories go before
// the root's times are set, and a stale one of a killed run is removed,
// not a live one of a long job (its own time is old, a directory in it is
// being written).
func TestStaging(t *testing.T) {
	s := newSandbox(t)
	stale := filepath.Join(s.root, extract.TempPrefix+"99.dead.stage")
	live := filepath.Join(s.root, extract.TempPrefix+"98.long.stage")
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "3"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "3", extract.TempPrefix+"99.dead.1"), []byte("half"), 0o600)
		if d == stale {
			os.Chtimes(filepath.Join(d, "3"), old, old)
		}
		os.Chtimes(d, old, old)
	}
	os.WriteFile(filepath.Join(s.root, "old"), []byte("to be replaced"), 0o644)

	r := s.open(t, extract.Options{NamedTemps: true, IOConcurrency: 8})
	var entries []model.Entry
	var files []tarFile
	for i := range 40 {
		p := fmt.Sprintf("d%d/f%02d", i%4, i)
		data := strings.Repeat(fmt.Sprint(i), 100+i)
		entries = append(entries, fileE(p, int64(len(data))))
		files = append(files, tf(p, data))
	}
	entries = append(entries, fileE("old", 3))
	files = append(files, tf("old", "new"))
	m := &wire.BatchManifest{ID: 1, Entries: entries}
	txn, err := r.Receive(m, needFor(r, m), strings.NewReader(string(tarOf(t, 1, files...))))
	if err != nil {
		t.Fatal(err)
	}
	if !exists(live) {
		t.Errorf("a live staging directory (of a long job) was removed")
	}
	os.RemoveAll(live)
	if got := stagingDirs(t, s.root); len(got) != 1 {
		t.Errorf("staging directories while writing: %q, want this receiver's only (the stale one removed)", got)
	}
	if ack := txn.Commit(1, nil); len(ack.Errors) != 0 || ack.Files != int64(len(entries)) {
		t.Fatalf("ack: %d files, errors %v", ack.Files, ack.Errors)
	}
	for i, e := range entries {
		checkFile(t, s.root, e, files[i].data)
	}
	top := dirE(".", 0o755)
	top.MTime = mtime + 99
	mustReceive(t, r, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{dirE("d0", 0o755), top}}, nil)
	if got := stagingDirs(t, s.root); len(got) != 0 {
		t.Errorf("staging directories after the final batch: %q", got)
	}
	checkDir(t, s.root, top)
	r.Close()
	checkDir(t, s.root, top) // closing touched nothing
	s.check(t)
}

// TestLandedOnlyWhereSlow: the receiver remembers the files it placed in
// directories it made only where that saves lookups (several operations
// at once); on a fast filesystem a million new files cost no memory there.
func TestLandedOnlyWhereSlow(t *testing.T) {
	for _, c := range []struct {
		width int
		keeps bool
	}{{1, false}, {8, true}} {
		s := newSandbox(t)
		r := s.open(t, extract.Options{IOConcurrency: c.width})
		var entries []model.Entry
		for i := range 20 {
			entries = append(entries, fileE(fmt.Sprintf("new/f%02d", i), 1))
		}
		tx := r.Begin(entries)
		for i := range entries {
			if err := tx.Write(i, strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
		}
		if ack := tx.Commit(1, nil); len(ack.Errors) > 0 {
			t.Fatalf("width %d: %v", c.width, ack.Errors)
		}
		if got := extract.LandedLen(r); (got > 0) != c.keeps {
			t.Errorf("width %d: %d placed files remembered; want them remembered: %v", c.width, got, c.keeps)
		}
		// Offered again, the files are found in place either way.
		need := r.Need(entries)
		for i, n := range need {
			if n {
				t.Errorf("width %d: %s needed again after it landed", c.width, entries[i].Path)
			}
		}
	}
}

// TestStaleStageSwapped: a local user who, once a stale staging directory
// is found, gives its name to another directory of DEST does not have that
// directory removed: what the stale one held goes, through the directory
// it was found as, and the name is left to what now holds it.
func TestStaleStageSwapped(t *testing.T) {
	s := newSandbox(t)
	stale := filepath.Join(s.root, extract.TempPrefix+"99.dead.stage")
	precious := filepath.Join(s.root, "precious")
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{filepath.Join(stale, "3"), filepath.Join(precious, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Chtimes(filepath.Join(stale, "3"), old, old)
	os.Chtimes(stale, old, old)
	swapped := false
	defer extract.SetStaleStageFound(func(name string) {
		if name != filepath.Base(stale) {
			return
		}
		if err := os.Rename(stale, stale+".away"); err != nil {
			t.Error(err)
		}
		if err := os.Rename(precious, stale); err != nil {
			t.Error(err)
		}
		swapped = true
	})()
	preciousSnap := snapshot(t, precious)

	r := s.open(t, extract.Options{NamedTemps: true, IOConcurrency: 8})
	// (In the root, which the receiver did not make: staged.)
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", 4)}}, tarOf(t, 1, tf("f", "data")))
	r.Close()
	if !swapped {
		t.Fatal("no stale staging directory was found: the swap was not tried")
	}
	if got := snapshot(t, stale); got != preciousSnap {
		t.Errorf("the directory given the stale one's name lost what it held:\n%s\nwas\n%s", got, preciousSnap)
	}
	if names, err := os.ReadDir(stale + ".away"); err != nil || len(names) != 0 {
		t.Errorf("the stale staging directory, moved away, holds %v (%v); want it emptied", names, err)
	}
}
