package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/sharder"
)

// TestJournalKeyParts: parts of one tree have journals of their own.
func TestJournalKeyParts(t *testing.T) {
	list := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(list, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, f := range []Scale{{}, {Shard: sharder.Shard{Index: 0, Count: 2}}, {Shard: sharder.Shard{Index: 1, Count: 2}},
		{FilesFrom: list}, {FilesFrom: list, From0: true}} {
		k := strings.Join(f.journalKey(), "|")
		if keys[k] {
			t.Errorf("%+v: key %q already used", f, k)
		}
		keys[k] = true
	}
	before := strings.Join((&Scale{FilesFrom: list}).journalKey(), "|")
	if err := os.WriteFile(list, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := strings.Join((&Scale{FilesFrom: list}).journalKey(), "|"); after == before {
		t.Errorf("a changed list keeps its key %q", after)
	}
}
