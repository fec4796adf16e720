package source_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// The sender hashes each regular file of a batch (several at once); a
// file it cannot read, or that changed since the walk, gets no sum and is
// then sent as usual.
func TestSourceSums(t *testing.T) {
	root := t.TempDir()
	var entries []model.Entry
	add := func(name, content string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, model.Entry{Path: name, Kind: model.KindFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Nlink: 1})
	}
	for i := range 30 {
		add(fmt.Sprintf("d%d/f%02d", i%4, i), fmt.Sprintf("file number %d", i))
	}
	add("empty", "")
	add("vanished", "gone before the hash")
	add("changed", "changed since the walk")
	entries = append(entries, model.Entry{Path: "d0", Kind: model.KindDir, Mode: 0o755})
	os.Remove(filepath.Join(root, "vanished"))
	later := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(root, "changed"), later, later)

	sums := source.Source{Root: root}.Sums(entries)
	if len(sums) != len(entries) {
		t.Fatalf("%d sums for %d entries", len(sums), len(entries))
	}
	for i := range 30 {
		if want := wire.HashBytes(fmt.Appendf(nil, "file number %d", i)); sums[i] != want {
			t.Errorf("%s: sum %x, want %x", entries[i].Path, sums[i], want)
		}
	}
	for i, want := range map[int]wire.Sum{30: wire.EmptySum, 31: {}, 32: {}, 33: {}} {
		if sums[i] != want {
			t.Errorf("%s %s: sum %x, want %x", entries[i].Kind, entries[i].Path, sums[i], want)
		}
	}
}
