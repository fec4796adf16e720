package extract_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

func markers(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, extract.InPlacePrefix+"*"))
	return m
}

// inPlaceBatch prepares, with --inplace, the delta of f (DEST holds it)
// to a new version of size bytes: its need, bases and block list.
func inPlaceBatch(t *testing.T, r *extract.Receiver, size int64) (*wire.BatchManifest, []bool, *extract.Deltas, *wire.BlockList) {
	t.Helper()
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", size)}}
	need := r.Need(m.Entries)
	d := r.PrepareDeltas(m.Entries, need)
	lists := d.Lists(m.ID, 1)
	if !need[0] || len(lists) != 1 {
		t.Fatalf("need %v, %d block lists: want f, with its block list", need, len(lists))
	}
	return m, need, d, lists[0]
}

// finishDelta sends content as the delta against bl and commits the
// batch with the sender's sum (one bit off if corrupt).
func finishDelta(t *testing.T, r *extract.Receiver, m *wire.BatchManifest, need []bool, d *extract.Deltas, bl *wire.BlockList, content []byte, corrupt bool) *wire.BatchAck {
	t.Helper()
	stream, sum := deltaSender(t, m.ID, "f", content, bl, nil)
	if corrupt {
		sum[0] ^= 1
	}
	tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	return tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}})
}

// TestDeltaInPlace: with --inplace, edits, an append, a truncation and a
// file all new are written into DEST's file itself: it ends as the new
// version, keeps its inode, and no temporary or marker is left.
func TestDeltaInPlace(t *testing.T) {
	rb := randFunc(5, 6)
	const size = 3<<20 + 12345
	for _, c := range deltaChanges(rb, size) {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			old := rb(size)
			content := c.change(old)
			f := filepath.Join(s.root, "f")
			if err := os.WriteFile(f, old, 0o644); err != nil {
				t.Fatal(err)
			}
			ino := inodeOf(t, f)
			// No room for a copy: in place needs none.
			defer extract.SetDeltaFree(100 << 10)()
			r := s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
			m, need, d, bl := inPlaceBatch(t, r, int64(len(content)))
			ack := finishDelta(t, r, m, need, d, bl, content, false)
			if len(ack.Errors) > 0 || ack.Files != 1 {
				t.Fatalf("ack %+v", ack)
			}
			if got, _ := os.ReadFile(f); !bytes.Equal(got, content) {
				t.Fatalf("DEST holds %d bytes, not the new %d", len(got), len(content))
			}
			if st, _ := os.Stat(f); st.ModTime().UnixNano() != mtime {
				t.Errorf("mtime %v", st.ModTime())
			}
			if got := inodeOf(t, f); got != ino {
				t.Errorf("inode %d, was %d: not patched in place", got, ino)
			}
			if left := append(temporaries(t, s.root), markers(t, s.root)...); len(left) > 0 {
				t.Errorf("left at DEST: %v", left)
			}
		})
	}
}

// TestDeltaInPlaceTorn: a patch in place cut off mid-stream leaves f
// part new, and marked; with its size and mtime forged to the new
// version's, the quick check (and -u) still finds it needed, and the next
// pass finishes it: the new content, the sum checked, the marker gone. A
// sum that differs leaves it marked.
func TestDeltaInPlaceTorn(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	const size = 4 << 20
	old, content := make([]byte, size), make([]byte, size)
	for i := range old {
		old[i], content[i] = byte(rnd.Uint32()), byte(rnd.Uint32())
	}
	s := newSandbox(t)
	f := filepath.Join(s.root, "f")
	if err := os.WriteFile(f, old, 0o644); err != nil {
		t.Fatal(err)
	}
	ino := inodeOf(t, f)
	r := s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
	m, need, d, bl := inPlaceBatch(t, r, size)
	stream, _ := deltaSender(t, m.ID, "f", content, bl, nil)
	// Cut at a seeded point past the first chunk of blocks (the receiver
	// writes a chunk once it has it whole).
	cut := wire.ReadChunk + 4096 + rnd.IntN(size/2)
	if _, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream[:cut])); err == nil {
		t.Fatal("a stream cut mid-file was received without error")
	}
	got, _ := os.ReadFile(f)
	if bytes.Equal(got, old) || bytes.Equal(got, content) {
		t.Fatal("f is not torn: the test cut too early or too late")
	}
	if len(markers(t, s.root)) != 1 {
		t.Fatalf("markers %v: want f's", markers(t, s.root))
	}
	// Forged: the new version's size and mtime.
	if err := os.Truncate(f, size); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, time.Unix(0, mtime), time.Unix(0, mtime)); err != nil {
		t.Fatal(err)
	}
	for _, o := range []extract.Options{{}, {Update: true}, {Check: wire.CheckSize}} {
		if n := s.open(t, o).Need(m.Entries); !n[0] {
			t.Fatalf("options %+v: the torn file, its size and mtime forged, is taken for up to date", o)
		}
	}

	// A finish whose sum differs: still marked.
	r = s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
	m, need, d, bl = inPlaceBatch(t, r, size)
	if ack := finishDelta(t, r, m, need, d, bl, content, true); len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeCorrupt || !strings.Contains(ack.Errors[0].Msg, "mid-patch") {
		t.Fatalf("ack %+v: want f corrupt, left marked", ack)
	}
	if len(markers(t, s.root)) != 1 {
		t.Fatal("a patch whose sum differs lost its marker")
	}

	// The finish: only the blocks still old go.
	r = s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
	m, need, d, bl = inPlaceBatch(t, r, size)
	if ack := finishDelta(t, r, m, need, d, bl, content, false); len(ack.Errors) > 0 || ack.Files != 1 {
		t.Fatalf("ack %+v", ack)
	}
	if got, _ := os.ReadFile(f); !bytes.Equal(got, content) {
		t.Fatal("the finished patch is not the new version")
	}
	if inodeOf(t, f) != ino {
		t.Error("the finished patch changed f's inode")
	}
	if left := markers(t, s.root); len(left) > 0 {
		t.Errorf("markers left: %v", left)
	}
	if n := s.open(t, extract.Options{}).Need(m.Entries); n[0] {
		t.Error("the finished file is still needed")
	}
}

// TestDeltaInPlaceTornReplaced: a torn file that a pass without
// --inplace replaces (the delta built in a copy) loses its marker with
// its old inode.
func TestDeltaInPlaceTornReplaced(t *testing.T) {
	s := newSandbox(t)
	const size = 2 << 20
	old, content := bytes.Repeat([]byte("o"), size), bytes.Repeat([]byte("n"), size)
	f := filepath.Join(s.root, "f")
	os.WriteFile(f, old, 0o644)
	r := s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
	m, need, d, bl := inPlaceBatch(t, r, size)
	stream, _ := deltaSender(t, m.ID, "f", content, bl, nil)
	if _, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream[:size/2])); err == nil {
		t.Fatal("a cut stream was received")
	}
	os.Chtimes(f, time.Unix(0, mtime), time.Unix(0, mtime))
	r = s.open(t, extract.Options{DeltaMin: 1})
	m, need, d, bl = inPlaceBatch(t, r, size)
	if ack := finishDelta(t, r, m, need, d, bl, content, false); len(ack.Errors) > 0 {
		t.Fatalf("ack %+v", ack)
	}
	if got, _ := os.ReadFile(f); !bytes.Equal(got, content) {
		t.Fatal("not the new version")
	}
	if left := markers(t, s.root); len(left) > 0 {
		t.Errorf("markers left: %v", left)
	}
}

// TestDeltaInPlaceRefused: --inplace writes no file with another name
// (a hard link: the delta goes in a copy, the other name keeps the old
// data), and no file another process holds locked (it fails before its
// data, unchanged).
func TestDeltaInPlaceRefused(t *testing.T) {
	const size = 2 << 20
	old, content := bytes.Repeat([]byte("o"), size), bytes.Repeat([]byte("n"), size)
	t.Run("hardlink", func(t *testing.T) {
		s := newSandbox(t)
		f := filepath.Join(s.root, "f")
		os.WriteFile(f, old, 0o644)
		if err := os.Link(f, filepath.Join(s.root, "g")); err != nil {
			t.Fatal(err)
		}
		r := s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
		m, need, d, bl := inPlaceBatch(t, r, size)
		if ack := finishDelta(t, r, m, need, d, bl, content, false); len(ack.Errors) > 0 {
			t.Fatalf("ack %+v", ack)
		}
		if got, _ := os.ReadFile(f); !bytes.Equal(got, content) {
			t.Fatal("f is not the new version")
		}
		if got, _ := os.ReadFile(filepath.Join(s.root, "g")); !bytes.Equal(got, old) {
			t.Fatal("f's other name g was written through")
		}
	})
	t.Run("locked", func(t *testing.T) {
		s := newSandbox(t)
		f := filepath.Join(s.root, "f")
		os.WriteFile(f, old, 0o644)
		h, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if err := unix.Flock(int(h.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		r := s.open(t, extract.Options{DeltaMin: 1, InPlace: true})
		m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", size)}}
		need := r.Need(m.Entries)
		d := r.PrepareDeltas(m.Entries, need)
		if need[0] {
			t.Fatal("a locked file is still asked for")
		}
		tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(tarOf(t, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if ack := tx.Commit(1, nil); len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "locked") || !strings.Contains(ack.Errors[0].Msg, "f") {
			t.Fatalf("ack %+v: want f failed as locked", ack)
		}
		if got, _ := os.ReadFile(f); !bytes.Equal(got, old) {
			t.Fatal("the locked file changed")
		}
	})
}

// TestDeltaInPlaceNoRoomHint: a file --inplace does not patch (another
// hard link at DEST), with no room for its copy, fails before its data
// saying why --inplace did not apply; without --inplace, the message
// says to use it.
func TestDeltaInPlaceNoRoomHint(t *testing.T) {
	for _, c := range []struct {
		opt  extract.Options
		want string
	}{
		{extract.Options{DeltaMin: 1}, "with --inplace"},
		{extract.Options{DeltaMin: 1, InPlace: true}, "no other hard link"},
	} {
		s := newSandbox(t)
		f := filepath.Join(s.root, "f")
		old := bytes.Repeat([]byte("o"), 2<<20)
		os.WriteFile(f, old, 0o644)
		os.Link(f, filepath.Join(s.root, "g"))
		func() {
			defer extract.SetDeltaFree(1000)()
			r := s.open(t, c.opt)
			m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", 2<<20)}}
			need := r.Need(m.Entries)
			d := r.PrepareDeltas(m.Entries, need)
			if need[0] {
				t.Skip("DEST's filesystem shares blocks: the copy needs no room")
			}
			tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(tarOf(t, 1)))
			if err != nil {
				t.Fatal(err)
			}
			ack := tx.Commit(1, nil)
			if len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "receive f: no room for the temporary copy") || !strings.Contains(ack.Errors[0].Msg, c.want) {
				t.Fatalf("options %+v: ack %+v, want f refused saying %q", c.opt, ack, c.want)
			}
		}()
		if got, _ := os.ReadFile(f); !bytes.Equal(got, old) {
			t.Fatal("DEST's file changed")
		}
	}
}

// TestDeltaInPlacePrune: --delete keeps the marker of a torn file that
// stays, and removes the marker of one it deletes or that is gone, whether
// the file sorts before its marker or after.
func TestDeltaInPlacePrune(t *testing.T) {
	s := newSandbox(t)
	for _, n := range []string{"kept", "deleted", "-deleted", "gone"} {
		os.WriteFile(filepath.Join(s.root, n), []byte(n), 0o644)
		if err := extract.MarkTorn(s.root, n, fileE(n, 2<<20)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(s.root, "gone"))
	r := s.open(t, extract.Options{})
	if _, err := r.Prune(".", extract.NewKeep("kept"), nil, false); err != nil {
		t.Fatal(err)
	}
	names, _ := os.ReadDir(s.root)
	var left []string
	for _, n := range names {
		left = append(left, n.Name())
	}
	if len(left) != 2 || left[1] != "kept" || !strings.HasPrefix(left[0], extract.InPlacePrefix) {
		t.Fatalf("DEST holds %v: want kept and its marker", left)
	}
	if n := r.Need([]model.Entry{fileE("kept", 2<<20)}); !n[0] {
		t.Fatal("kept lost its marker")
	}
}
