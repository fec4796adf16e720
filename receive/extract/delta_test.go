package extract_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// deltaSender plays the sending side of a block delta against bl:
// the new content's block hashes, the extents of the blocks that
// differ, and the tar stream carrying them.
func deltaSender(tb testing.TB, id uint64, name string, content []byte, bl *wire.BlockList, ext []wire.Extent) ([]byte, wire.Sum) {
	tb.Helper()
	return deltaSenderRec(tb, id, name, content, bl, ext, nil)
}

// deltaSenderRec is deltaSender with more PAX records (a range's): content
// is then the range's bytes.
func deltaSenderRec(tb testing.TB, id uint64, name string, content []byte, bl *wire.BlockList, ext []wire.Extent, rec map[string]string) ([]byte, wire.Sum) {
	tb.Helper()
	size, bs := int64(len(content)), bl.BlockSize
	hashes := make([]wire.Sum, wire.BlockCount(size, bs))
	plan := ext == nil
	for k := range hashes {
		off := int64(k) * bs
		hashes[k] = wire.BlockHash(content[off:min(off+bs, size)])
		if plan && bl.Differs(k, size, hashes[k]) {
			ext = appendBlock(ext, off, min(bs, size-off))
		}
	}
	if ext == nil {
		ext = []wire.Extent{}
	}
	var data []byte
	for _, x := range ext {
		data = append(data, content[x.Off:x.Off+x.Len]...)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{wire.PAXBatch: strconv.FormatUint(id, 10)}})
	recs := map[string]string{wire.PAXDelta: wire.FormatExtents(ext)}
	for k, v := range rec {
		recs[k] = v
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, mtime),
		PAXRecords: recs, Format: tar.FormatPAX}); err != nil {
		tb.Fatal(err)
	}
	tw.Write(data)
	tw.Close()
	return buf.Bytes(), wire.DeltaSum(size, bs, hashes)
}

func appendBlock(ext []wire.Extent, off, l int64) []wire.Extent {
	if n := len(ext); n > 0 && ext[n-1].Off+ext[n-1].Len == off {
		ext[n-1].Len += l
		return ext
	}
	return append(ext, wire.Extent{Off: off, Len: l})
}

// deltaDest writes DEST's old version of name and prepares the delta of
// a new version of size bytes against it (with the receive options opt,
// if given, else DeltaMin alone).
func deltaDest(t *testing.T, s *sandbox, old []byte, size int64, opt ...extract.Options) (*extract.Receiver, *wire.BatchManifest, []bool, *extract.Deltas, *wire.BlockList) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.root, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	o := extract.Options{DeltaMin: 1}
	if len(opt) > 0 {
		o = opt[0]
	}
	r := s.open(t, o)
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", size)}}
	need := r.Need(m.Entries)
	d := r.PrepareDeltas(m.Entries, need)
	lists := d.Lists(m.ID, len(m.Entries))
	if !need[0] || len(lists) != 1 {
		t.Fatalf("need %v, %d block lists: want the file, with its block list", need, len(lists))
	}
	return r, m, need, d, lists[0]
}

func temporaries(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, extract.TempPrefix+"*"))
	return m
}

// randFunc returns a maker of random bytes, seeded.
func randFunc(a, b uint64) func(int) []byte {
	rnd := rand.New(rand.NewPCG(a, b))
	return func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rnd.Uint32())
		}
		return p
	}
}

// deltaChange makes a new version of a file from its old one; at most
// maxData bytes of it need to travel.
type deltaChange struct {
	name    string
	change  func(old []byte) []byte
	maxData int
}

// deltaChanges are edits at unaligned offsets, an append, a truncation and
// a file of the same size all new, of an old version of size bytes (rb
// makes random bytes).
func deltaChanges(rb func(int) []byte, size int) []deltaChange {
	return []deltaChange{
		{"edits", func(old []byte) []byte {
			b := bytes.Clone(old)
			for _, off := range []int{1, 200_000, 2_000_001, size - 3} {
				b[off] ^= 1
			}
			return b
		}, 4 * wire.MinBlock},
		{"append", func(old []byte) []byte { return append(bytes.Clone(old), rb(70_000)...) }, wire.MinBlock + 70_000},
		{"truncate", func(old []byte) []byte { return bytes.Clone(old[:size-1_000_003]) }, 0},
		{"replaced", func(old []byte) []byte { return rb(size) }, size},
	}
}

// TestDeltaResults: edits at unaligned offsets, an append, a truncation
// and a file of the same size all new, each written from the blocks
// that differ into a copy of DEST's file: the result is the new content,
// and only the changed blocks were carried.
func TestDeltaResults(t *testing.T) {
	rb := randFunc(1, 2)
	const size = 3<<20 + 12345
	for _, c := range deltaChanges(rb, size) {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			old := rb(size)
			content := c.change(old)
			r, m, need, d, bl := deltaDest(t, s, old, int64(len(content)))
			stream, sum := deltaSender(t, m.ID, "f", content, bl, nil)
			if len(stream) > c.maxData+4096 {
				t.Errorf("the delta's tar stream is %d bytes, want at most %d", len(stream), c.maxData+4096)
			}
			tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			ack := tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}})
			if len(ack.Errors) > 0 || ack.Files != 1 {
				t.Fatalf("ack %+v", ack)
			}
			got, _ := os.ReadFile(filepath.Join(s.root, "f"))
			if !bytes.Equal(got, content) {
				t.Fatalf("DEST holds %d bytes, not the new %d", len(got), len(content))
			}
			if st, _ := os.Stat(filepath.Join(s.root, "f")); st.ModTime().UnixNano() != mtime {
				t.Errorf("mtime %v", st.ModTime())
			}
			if tmp := temporaries(t, s.root); len(tmp) > 0 {
				t.Errorf("temporaries left: %v", tmp)
			}
		})
	}
}

// TestDeltaCorrupt: a delta whose result does not hash to the sender's
// sum fails its entry and is never installed; DEST keeps its old file.
func TestDeltaCorrupt(t *testing.T) {
	s := newSandbox(t)
	old := bytes.Repeat([]byte("old data "), 300_000)
	content := bytes.Clone(old)
	content[1_000_000] = 'X'
	r, m, need, d, bl := deltaDest(t, s, old, int64(len(content)))
	stream, sum := deltaSender(t, m.ID, "f", content, bl, nil)
	sum[0] ^= 1
	tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	ack := tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}})
	if len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeCorrupt {
		t.Fatalf("ack errors %+v, want the entry corrupt", ack.Errors)
	}
	if got, _ := os.ReadFile(filepath.Join(s.root, "f")); !bytes.Equal(got, old) {
		t.Fatal("DEST's file changed")
	}
	if tmp := temporaries(t, s.root); len(tmp) > 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}

// TestDeltaHostileMap: a sender's delta map that leaves the file, overlaps,
// cuts a block, declares other bytes than the entry carries, or comes
// for a file the receiver sent no block list for, and a map of blocks of
// zeros that touches a block of data, cuts a block or comes without a
// delta, is refused as a bad stream, and DEST keeps its file and no
// temporary.
func TestDeltaHostileMap(t *testing.T) {
	const size = 1 << 20
	bs := int64(wire.MinBlock)
	zeros := func(z ...wire.Extent) map[string]string {
		return map[string]string{wire.PAXDeltaZero: wire.FormatExtents(z)}
	}
	data := []wire.Extent{{Off: 6 * bs, Len: bs}}
	for _, c := range []struct {
		name string
		ext  []wire.Extent // nil: the file whole
		rec  map[string]string
	}{
		{"outside", []wire.Extent{{Off: size, Len: bs}}, nil},
		{"overlap", []wire.Extent{{Off: 0, Len: 2 * bs}, {Off: bs, Len: bs}}, nil},
		{"unaligned", []wire.Extent{{Off: 100, Len: bs}}, nil},
		{"cut block", []wire.Extent{{Off: 0, Len: bs - 1}}, nil},
		{"zeros over data", data, zeros(wire.Extent{Off: 6 * bs, Len: bs})},
		{"zeros into data", data, zeros(wire.Extent{Off: 5 * bs, Len: 2 * bs})},
		{"zeros unaligned", data, zeros(wire.Extent{Off: 3*bs + 1, Len: bs})},
		{"zeros without a delta", nil, zeros(wire.Extent{Off: 3 * bs, Len: bs})},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			old := bytes.Repeat([]byte{7}, size)
			r, m, need, d, bl := deltaDest(t, s, old, size)
			content := make([]byte, size+int(bs)) // room for the extents to read from
			stream, _ := deltaSenderRec(t, m.ID, "f", content, bl, c.ext, c.rec)
			if c.ext == nil {
				stream = wholeWith(t, m.ID, "f", content[:size], c.rec)
			}
			_, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
			if !errors.Is(err, extract.ErrStream) {
				t.Fatalf("got %v, want a bad stream", err)
			}
			if got, _ := os.ReadFile(filepath.Join(s.root, "f")); !bytes.Equal(got, old) {
				t.Fatal("DEST's file changed")
			}
			if tmp := temporaries(t, s.root); len(tmp) > 0 {
				t.Errorf("temporaries left: %v", tmp)
			}
		})
	}
	t.Run("no block list", func(t *testing.T) {
		s := newSandbox(t)
		r := s.open(t, extract.Options{})
		m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", 10)}}
		stream, _ := deltaSender(t, m.ID, "f", []byte("0123456789"), &wire.BlockList{BlockSize: bs}, []wire.Extent{{Off: 0, Len: 10}})
		_, err := r.Receive(m, r.Need(m.Entries), bytes.NewReader(stream))
		if !errors.Is(err, extract.ErrStream) || !strings.Contains(err.Error(), "no block list") {
			t.Fatalf("got %v, want a bad stream naming the missing block list", err)
		}
	})
}

// TestDeltaNoRoom: where DEST cannot share blocks (no reflink) and has
// less room than the file, the file fails before any byte of it is asked
// for, saying why; DEST keeps its file and no temporary.
func TestDeltaNoRoom(t *testing.T) {
	s := newSandbox(t)
	old := bytes.Repeat([]byte{1}, 1<<20)
	if err := os.WriteFile(filepath.Join(s.root, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(s.root, "probe")
	os.WriteFile(probe, []byte("x"), 0o644)
	if out, err := exec.Command("cp", "--reflink=always", probe, probe+"2").CombinedOutput(); err == nil {
		t.Skip("DEST's filesystem shares blocks: the copy needs no room")
	} else {
		t.Logf("no reflink here: %s", out)
	}
	os.Remove(probe)
	defer extract.SetDeltaFree(1000)()
	r := s.open(t, extract.Options{DeltaMin: 1})
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", 1<<20+1)}}
	need := r.Need(m.Entries)
	d := r.PrepareDeltas(m.Entries, need)
	if need[0] || len(d.Lists(1, 1)) != 0 {
		t.Fatalf("need %v: want the file refused before its data", need)
	}
	tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(tarOf(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	ack := tx.Commit(1, nil)
	if len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "no room for the temporary copy") || ack.Skipped != 0 {
		t.Fatalf("ack %+v: want f failed for want of room", ack)
	}
	if got, _ := os.ReadFile(filepath.Join(s.root, "f")); !bytes.Equal(got, old) {
		t.Fatal("DEST's file changed")
	}
	if tmp := temporaries(t, s.root); len(tmp) > 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}

// rangeDeltaBatch prepares range [off, off+l) of f, a new version of
// size bytes, against DEST's file, as batch id: its need, delta bases and
// block list (nil if none went).
func rangeDeltaBatch(t *testing.T, r *extract.Receiver, id uint64, size, off, l int64) (*wire.BatchManifest, []bool, *extract.Deltas, *wire.BlockList) {
	t.Helper()
	e := fileE("f", size)
	e.Off, e.Len = off, l
	m := &wire.BatchManifest{ID: id, Entries: []model.Entry{e}}
	need := r.Need(m.Entries)
	d := r.PrepareDeltas(m.Entries, need)
	var bl *wire.BlockList
	if lists := d.Lists(m.ID, 1); len(lists) == 1 {
		bl = lists[0]
	}
	return m, need, d, bl
}

// landRanges sends content, the new version of DEST's f, range by range
// (of split bytes) as block deltas against the block lists r sends, and
// returns the bytes carried. plan, given each range's offset, length,
// bytes and block list, returns the extents to send (nil: the blocks that
// differ) and PAX records to add.
func landRanges(t *testing.T, r *extract.Receiver, content []byte, split int64, plan func(off, l int64, part []byte, bl *wire.BlockList) ([]wire.Extent, map[string]string)) int {
	t.Helper()
	size := int64(len(content))
	var carried int
	for k, off := 0, int64(0); off < size; k, off = k+1, off+split {
		l := min(split, size-off)
		m, need, d, bl := rangeDeltaBatch(t, r, uint64(k+1), size, off, l)
		if !need[0] || bl == nil {
			t.Fatalf("range at %d: need %v, block list %v: want it asked for as a delta", off, need, bl != nil)
		}
		ext, rec := plan(off, l, content[off:off+l], bl)
		rec = maps.Clone(rec)
		if rec == nil {
			rec = map[string]string{}
		}
		rec[wire.PAXRange] = wire.FormatRange(&m.Entries[0])
		stream, sum := deltaSenderRec(t, m.ID, "f", content[off:off+l], bl, ext, rec)
		carried += len(stream)
		tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		if ack := tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}}); len(ack.Errors) > 0 {
			t.Fatalf("range at %d: ack %+v", off, ack)
		}
	}
	return carried
}

// TestDeltaRanges: a split file's ranges each go as a block delta against
// DEST's file, the blocks counted from the range's offset: an edit across
// their boundary and an append past the old end; the partial holds the
// new content once the last range lands, and only the blocks that changed
// (and the tail) were carried.
func TestDeltaRanges(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	const oldSize, size, split = 5<<20 + 777, 6<<20 + 4321, 2<<20 + 64<<10 // a split size no multiple of the block
	old := make([]byte, oldSize)
	for i := range old {
		old[i] = byte(rnd.Uint32())
	}
	content := append(bytes.Clone(old), make([]byte, size-oldSize)...)
	for i := oldSize; i < size; i++ {
		content[i] = byte(rnd.Uint32())
	}
	for _, off := range []int{5, split - 3, split + 2, 4_000_000} {
		content[off] ^= 0x40
	}
	s := newSandbox(t)
	if err := os.WriteFile(filepath.Join(s.root, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, extract.Options{DeltaMin: 1})
	carried := landRanges(t, r, content, split, func(off, l int64, _ []byte, bl *wire.BlockList) ([]wire.Extent, map[string]string) {
		if bl.BlockSize != wire.BlockSize(size) || bl.Len != min(l, oldSize-off) {
			t.Fatalf("range at %d: block list of %d bytes in blocks of %d", off, bl.Len, bl.BlockSize)
		}
		return nil, nil
	})
	got, _ := os.ReadFile(filepath.Join(s.root, "f"))
	if !bytes.Equal(got, content) {
		t.Fatalf("DEST holds %d bytes, not the new %d", len(got), len(content))
	}
	// 5 blocks for the edits (one run across the ranges' boundary),
	// the old last block and the tail; headers.
	if max := 6*wire.MinBlock + (size - oldSize) + 4*4096; carried > max {
		t.Errorf("%d bytes carried, want at most %d", carried, max)
	}
	if tmp := temporaries(t, s.root); len(tmp) > 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}

// TestDeltaRangeHostile: a delta map for a range that leaves the range or
// cuts a block is refused as a bad stream; one that leaves out a block
// past DEST's old end, or whose DEST file changed after its blocks were
// hashed, fails the range. Either way DEST keeps its old file, and the
// range is not recorded: the next pass asks for it again.
func TestDeltaRangeHostile(t *testing.T) {
	const oldSize, size, split = 3 << 20, 4<<20 + 100, 2 << 20
	bs := int64(wire.BlockSize(size))
	for _, c := range []struct {
		name   string
		ext    []wire.Extent
		stream bool // refused as a bad stream; else the range fails
		change bool // DEST's file changes after its hashes went
	}{
		{"outside the range", []wire.Extent{{Off: split, Len: bs}}, true, false},
		{"unaligned", []wire.Extent{{Off: 100, Len: bs}}, true, false},
		{"cut block", []wire.Extent{{Off: 0, Len: bs - 1}}, true, false},
		{"tail left out", []wire.Extent{}, false, false},
		{"DEST changed", nil, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			old := bytes.Repeat([]byte{7}, oldSize)
			if err := os.WriteFile(filepath.Join(s.root, "f"), old, 0o644); err != nil {
				t.Fatal(err)
			}
			r := s.open(t, extract.Options{DeltaMin: 1})
			// The second range: 1 MiB of DEST's file, then past its end.
			m, need, d, bl := rangeDeltaBatch(t, r, 1, size, split, size-split)
			if bl == nil {
				t.Fatal("no block list for the range")
			}
			// DEST's bytes, then new ones past its end.
			content := append(bytes.Repeat([]byte{7}, oldSize-split), bytes.Repeat([]byte{9}, size-oldSize+int(bs))...)
			stream, sum := deltaSenderRec(t, m.ID, "f", content[:size-split], bl, c.ext, map[string]string{wire.PAXRange: wire.FormatRange(&m.Entries[0])})
			want := old
			if c.change {
				want = bytes.Clone(old)
				want[split+5] = 1
				if err := os.WriteFile(filepath.Join(s.root, "f"), want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
			if c.stream {
				if !errors.Is(err, extract.ErrStream) {
					t.Fatalf("got %v, want a bad stream", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				ack := tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}})
				if len(ack.Errors) != 1 || ack.Files != 0 {
					t.Fatalf("ack %+v: want the range failed", ack)
				}
			}
			if got, _ := os.ReadFile(filepath.Join(s.root, "f")); !bytes.Equal(got, want) {
				t.Fatal("DEST's file changed")
			}
			if need := r.Need(m.Entries); !need[0] {
				t.Fatal("the range counts as landed")
			}
		})
	}
}
