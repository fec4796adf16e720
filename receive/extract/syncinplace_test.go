package extract_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
)

// TestSyncInPlace: with SyncInPlace (--remove-source-files), a file found
// up to date is made durable before the ack, and one that is no longer
// as found when the batch commits (changed, or gone) fails in the ack,
// so that the sender keeps its copy.
func TestSyncInPlace(t *testing.T) {
	s := newSandbox(t)
	for _, name := range []string{"same", "changed", "gone"} {
		p := filepath.Join(s.root, "d", name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, time.Unix(0, mtime), time.Unix(0, mtime)); err != nil {
			t.Fatal(err)
		}
	}
	entries := []model.Entry{fileE("d/same", 3), fileE("d/changed", 3), fileE("d/gone", 3)}
	r := s.open(t, extract.Options{Fsync: true, SyncInPlace: true})
	need := r.Need(entries)
	for i, n := range need {
		if n {
			t.Fatalf("%s needed, want found up to date", entries[i].Path)
		}
	}
	txn := r.Begin(entries)
	for i := range entries {
		txn.Skip(i)
	}
	os.WriteFile(filepath.Join(s.root, "d/changed"), []byte("abcdef"), 0o644)
	os.Remove(filepath.Join(s.root, "d/gone"))
	ack := txn.Commit(1, nil)
	failed := map[string]string{}
	for _, e := range ack.Errors {
		failed[entries[e.Index].Path] = e.Msg
	}
	if _, ok := failed["d/same"]; ok || len(failed) != 2 ||
		!strings.Contains(failed["d/changed"], "changed at the destination") || !strings.Contains(failed["d/gone"], "no such file") {
		t.Errorf("ack errors %v; want d/changed and d/gone failed, naming why, and d/same not", failed)
	}
	if ack.FsyncNanos <= 0 {
		t.Errorf("no time in fsync: the files found up to date were not synced")
	}
}
