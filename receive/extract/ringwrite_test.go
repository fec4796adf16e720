package extract

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/uring"
)

func needRing(t *testing.T) {
	t.Helper()
	r := uring.Get()
	if r == nil {
		t.Skip("no io_uring here")
	}
	uring.Put(r, false)
}

// TestRingCreates: a batch of small files into a directory the receiver
// makes is created and written through io_uring, a group at a time, and
// lands whole: the sender's data, mode and mtime.
func TestRingCreates(t *testing.T) {
	needRing(t)
	root := t.TempDir()
	r, err := Open(root, Options{IOConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3*createGroup + 5
	b := newSmallBatch(t, 1, "new", n)
	before := ringCreated.Load()
	txn, err := r.Receive(b.m, b.need, bytes.NewReader(b.tar))
	if err != nil {
		t.Fatal(err)
	}
	ack := txn.CommitSums(1, nil, b.sums)
	if ack.Files != n || len(ack.Errors) != 0 {
		t.Fatalf("ack: %d files, errors %v", ack.Files, ack.Errors)
	}
	if got := ringCreated.Load() - before; got != n {
		t.Errorf("%d of %d files created through io_uring", got, n)
	}
	want := bytes.Repeat([]byte("0123456789"), 100)
	for _, e := range b.m.Entries {
		p := filepath.Join(root, e.Path)
		data, err := os.ReadFile(p)
		st, serr := os.Lstat(p)
		if err != nil || serr != nil || !bytes.Equal(data, want) || st.Mode() != 0o644 || !st.ModTime().Equal(time.Unix(0, e.MTime)) {
			t.Fatalf("%s: %d bytes (%v), %v, mode %v", e.Path, len(data), err, st.ModTime(), st.Mode())
		}
	}
}

// TestRingCreateNameTaken: a local user who takes names in the new
// directory between the read of a group and its creation (a symlink to a
// file outside DEST, a file of their own) neither has the symlink
// followed nor keeps the names: the sender's files replace both, and the
// file outside is untouched.
func TestRingCreateNameTaken(t *testing.T) {
	needRing(t)
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(root, Options{IOConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := newSmallBatch(t, 1, "new", 10)
	raced := false
	beforeRingCreate = func([]uring.NewFile) {
		if raced {
			return
		}
		raced = true
		if err := os.Symlink(outside, filepath.Join(root, "new/f00003")); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(filepath.Join(root, "new/f00005"), []byte("theirs"), 0o666); err != nil {
			t.Error(err)
		}
	}
	defer func() { beforeRingCreate = nil }()
	txn, err := r.Receive(b.m, b.need, bytes.NewReader(b.tar))
	if err != nil {
		t.Fatal(err)
	}
	ack := txn.CommitSums(1, nil, b.sums)
	if !raced {
		t.Fatal("no group went through the ring")
	}
	if ack.Files != 10 || len(ack.Errors) != 0 {
		t.Fatalf("ack: %d files, errors %v", ack.Files, ack.Errors)
	}
	want := bytes.Repeat([]byte("0123456789"), 100)
	for _, e := range b.m.Entries {
		p := filepath.Join(root, e.Path)
		st, err := os.Lstat(p)
		data, _ := os.ReadFile(p)
		if err != nil || !st.Mode().IsRegular() || !bytes.Equal(data, want) {
			t.Errorf("%s: %v %v, %d bytes", e.Path, err, st.Mode(), len(data))
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "keep me" {
		t.Errorf("the file outside DEST now holds %q", got)
	}
}

// TestRingCreateArenaReused: batch after batch of small files, the create
// queue's arena (createArena bytes) is taken from the batches before, not
// allocated (and cleared by the runtime) again for each: a batch of a few
// small files allocates far less than the arena.
func TestRingCreateArenaReused(t *testing.T) {
	needRing(t)
	r, err := Open(t.TempDir(), Options{IOConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	const batches, n = 20, 4
	bs := make([]smallBatch, batches+1)
	for j := range bs {
		bs[j] = newSmallBatch(t, uint64(j+1), fmt.Sprintf("d%d", j), n)
	}
	receive := func(b *smallBatch) {
		txn, err := r.Receive(b.m, b.need, bytes.NewReader(b.tar))
		if err != nil {
			t.Fatal(err)
		}
		if ack := txn.CommitSums(b.m.ID, nil, b.sums); ack.Files != n || len(ack.Errors) != 0 {
			t.Fatalf("ack: %d files, errors %v", ack.Files, ack.Errors)
		}
	}
	receive(&bs[0]) // the first takes its arena new
	before := ringCreated.Load()
	var m0, m1 runtime.MemStats
	runtime.GC()
	// No collection while the batches run: one empties the pool, and
	// under load (the whole suite at once) several did, each batch after
	// one taking a new arena, as if it were not kept.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.ReadMemStats(&m0)
	for j := 1; j <= batches; j++ {
		receive(&bs[j])
	}
	runtime.ReadMemStats(&m1)
	if got := ringCreated.Load() - before; got != batches*n {
		t.Fatalf("%d of %d files created through io_uring", got, batches*n)
	}
	if per := (m1.TotalAlloc - m0.TotalAlloc) / batches; per >= createArena/2 {
		t.Errorf("%d bytes allocated a batch of %d small files, want well under the arena's %d", per, n, createArena)
	}
}
