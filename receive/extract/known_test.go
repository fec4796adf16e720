package extract_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// TestKnownTargetsBounded: with room for only a few hard-link targets in
// memory, a tree of thousands of hard-linked files (two snapshots) lands
// with every link a link, the targets kept in memory never exceed the
// limit, a link to a target not written yet is refused until its file
// has landed (the set takes targets after lookups, as a retried batch
// brings them), and a link to a file the job did not write is refused.
func TestKnownTargetsBounded(t *testing.T) {
	const files, mem = 3000, 100
	defer func(m int) { extract.KnownMem = m }(extract.KnownMem)
	extract.KnownMem = mem

	src := filepath.Join(t.TempDir(), "src")
	if err := gentree.Snapshots(src, files); err != nil {
		t.Fatal(err)
	}
	var batches []*model.Batch
	var links, dirs []model.Entry
	out := make(chan *model.Batch)
	done := make(chan error, 1)
	go func() {
		_, err := sharder.Run(context.Background(), src, sharder.Options{Deferred: func(e model.Entry) {
			switch e.Kind {
			case model.KindHardlink:
				links = append(links, e)
			case model.KindDir:
				dirs = append(dirs, e)
			}
		}}, out)
		done <- err
	}()
	for b := range out {
		batches = append(batches, b)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(links) != files {
		t.Fatalf("the walk found %d hard links, want %d", len(links), files)
	}

	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	id := uint64(0)
	inMem := func(when string) {
		if n := extract.KnownInMem(r); n >= mem {
			t.Fatalf("%s: %d hard-link targets in memory, limit %d", when, n, mem)
		}
	}
	data := func(b *model.Batch) {
		id++
		var tfs []tarFile
		for _, e := range b.Entries {
			tfs = append(tfs, tf(e.Path, ""))
		}
		mustReceive(t, r, &wire.BatchManifest{ID: id, Entries: b.Entries}, tarOf(t, id, tfs...))
		inMem("data batch")
	}
	final := func(es []model.Entry) *wire.BatchAck {
		id++
		m := &wire.BatchManifest{ID: id, Flags: wire.FlagFinal, Entries: es}
		txn, err := r.Receive(m, needFor(r, m), strings.NewReader(string(tarOf(t, id))))
		if err != nil {
			t.Fatal(err)
		}
		return txn.Commit(id, nil)
	}
	written := map[string]bool{}
	half := len(batches) / 2
	for _, b := range batches[:half] {
		data(b)
		for _, e := range b.Entries {
			written[e.Path] = true
		}
	}
	// The links whose targets have landed go in; the others are refused.
	ack := final(links)
	refused := map[int]bool{}
	for _, e := range ack.Errors {
		if !strings.Contains(e.Msg, "not a file this job wrote") {
			t.Errorf("%s: %s", links[e.Index].Path, e.Msg)
		}
		refused[e.Index] = true
	}
	var again []model.Entry
	for i, e := range links {
		if refused[i] == written[e.Link] {
			t.Fatalf("link %s to %s: refused %v, its target written %v", e.Path, e.Link, refused[i], written[e.Link])
		}
		if refused[i] {
			again = append(again, e)
		}
	}
	if len(again) == 0 || len(again) == len(links) {
		t.Fatalf("%d of %d links refused before the second half of the data: the test splits nothing", len(again), len(links))
	}
	for _, b := range batches[half:] {
		data(b)
	}
	if n := extract.KnownTables(r); n == 0 {
		t.Fatalf("%d targets with room for %d in memory: nothing on disk", files, mem)
	}
	for len(again) > 0 {
		n := min(len(again), 1000)
		if ack := final(again[:n]); len(ack.Errors) > 0 {
			t.Fatalf("%d links refused once their targets landed, first %s: %s", len(ack.Errors), again[ack.Errors[0].Index].Path, ack.Errors[0].Msg)
		}
		again = again[n:]
		inMem("links")
	}
	// Directories last, deepest first, for their mtimes.
	for i := len(dirs) - 1; i >= 0; i-- {
		if ack := final(dirs[i : i+1]); len(ack.Errors) > 0 {
			t.Fatalf("directory %s: %s", dirs[i].Path, ack.Errors[0].Msg)
		}
	}
	treecmp.Equal(t, src, s.root)

	// A file the job did not write, beside ones it did, and one that is
	// not there: links to them are refused with the set on disk.
	plant := filepath.Join(s.root, "s1", "planted")
	if err := os.WriteFile(plant, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ack = final([]model.Entry{hardE("evil", "s1/planted"), hardE("evil2", "s1/nothing")})
	if len(ack.Errors) != 2 {
		t.Fatalf("links to files the job did not write: %d refused, want 2", len(ack.Errors))
	}
	for _, e := range ack.Errors {
		if !strings.Contains(e.Msg, "not a file this job wrote") {
			t.Errorf("link refused for another reason: %s", e.Msg)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.root, "evil")); err == nil {
		t.Error("evil was linked")
	}
}
