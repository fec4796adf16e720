package source

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/holes"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// deltaFile writes SRC's file f (its blocks differing from old's where
// old differs) and returns its entry, and the receiver's block list of
// old.
func deltaFile(t *testing.T, root string, old, content []byte) (*wire.BatchManifest, map[int]*wire.BlockList) {
	t.Helper()
	p := filepath.Join(root, "f")
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	e := model.Entry{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: st.Size(), MTime: st.ModTime().UnixNano(), Nlink: 1}
	bs := wire.BlockSize(e.Size)
	l := int64(min(len(old), len(content)))
	bl := &wire.BlockList{ID: 1, BlockSize: bs, Len: l, Hashes: make([]wire.Sum, wire.BlockCount(l, bs))}
	for k := range bl.Hashes {
		off := int64(k) * bs
		bl.Hashes[k] = wire.BlockHash(old[off:min(off+bs, l)])
	}
	return &wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}, map[int]*wire.BlockList{0: bl}
}

// TestDeltaSendsChangedBlocks: a file with one changed byte and a grown
// tail goes as the block holding the byte and the blocks past the old
// end, named by its delta map, with the sum of its blocks' hashes; the
// counters say what it saved.
func TestDeltaSendsChangedBlocks(t *testing.T) {
	root := t.TempDir()
	bs := int64(wire.MinBlock)
	old := bytes.Repeat([]byte("0123456789abcdef"), 8*wire.MinBlock/16) // 8 blocks
	content := append(bytes.Clone(old), "tail"...)
	content[2*bs+1000] = 'X' // block 2
	m, blocks := deltaFile(t, root, old, content)
	var buf bytes.Buffer
	var ctr metrics.Stream
	w, err := Source{Root: root}.WriteBatch(&buf, m, []bool{true}, blocks, &ctr, true)
	if err != nil || len(w.Failed) > 0 {
		t.Fatalf("WriteBatch: %v %v", err, w.Failed)
	}
	wantExt := []wire.Extent{{Off: 2 * bs, Len: bs}, {Off: 8 * bs, Len: 4}}
	tr := tar.NewReader(&buf)
	tr.Next() // the batch's global header
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.PAXRecords[wire.PAXDelta]; got != wire.FormatExtents(wantExt) {
		t.Fatalf("delta map %q, want %q", got, wire.FormatExtents(wantExt))
	}
	data, _ := io.ReadAll(tr)
	if want := append(bytes.Clone(content[2*bs:3*bs]), "tail"...); !bytes.Equal(data, want) {
		t.Fatalf("the entry carries %d bytes, not the changed block and the tail", len(data))
	}
	if len(w.Deltas) != 1 || w.Deltas[0].Sent != bs+4 || ctr.DeltaSaved.Load() != int64(len(content))-bs-4 || ctr.BytesSent.Load() != bs+4 {
		t.Fatalf("deltas %+v, saved %d, sent %d", w.Deltas, ctr.DeltaSaved.Load(), ctr.BytesSent.Load())
	}
	hashes := make([]wire.Sum, wire.BlockCount(int64(len(content)), bs))
	for k := range hashes {
		off := int64(k) * bs
		hashes[k] = wire.BlockHash(content[off:min(off+bs, int64(len(content)))])
	}
	if len(w.Sums) != 1 || w.Sums[0].Sum != wire.DeltaSum(int64(len(content)), bs, hashes) {
		t.Fatalf("sums %+v: not the delta's", w.Sums)
	}
}

// TestDeltaBlockChangedWhileRead: a block that changes between the
// delta's two passes (its size and mtime kept, which Recheck alone would
// not see) is caught by its hash: the file is discarded as one that
// changed while read (the pool sends it again), with no sum.
func TestDeltaBlockChangedWhileRead(t *testing.T) {
	root := t.TempDir()
	old := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	content := bytes.Clone(old)
	content[300_000] = 'X'
	m, blocks := deltaFile(t, root, old, content)
	p := filepath.Join(root, "f")
	deltaHook = func(string) {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.WriteAt([]byte("Y"), 300_001)
		f.Close()
		mt := time.Unix(0, m.Entries[0].MTime)
		os.Chtimes(p, mt, mt)
	}
	t.Cleanup(func() { deltaHook = nil })
	var buf bytes.Buffer
	w, err := Source{Root: root}.WriteBatch(&buf, m, []bool{true}, blocks, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Failed) != 1 || !errors.Is(w.Failed[0].Err, ErrChanged) || len(w.Discards) != 1 || len(w.Sums) != 0 || len(w.Deltas) != 0 {
		t.Fatalf("failed %v, discards %v, sums %v, deltas %v: want the file discarded as changed", w.Failed, w.Discards, w.Sums, w.Deltas)
	}
}

// TestDeltaSparseSource: SRC's 64 GiB image holding 1 MiB of data, where
// DEST's copy holds other data in that block and in one SRC has a hole,
// goes as the one block that changed, its holes named as zeros and sent
// as no bytes, and not read: its sum is that of the blocks' hashes, those
// of the holes the hash of zeros.
func TestDeltaSparseSource(t *testing.T) {
	root := t.TempDir()
	const size, at = 64 << 30, 10 << 30
	p := filepath.Join(root, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("new "), 1<<18)
	f.WriteAt(data, at)
	f.Truncate(size)
	f.Close()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if m := holes.Data(fdOf(t, p), 0, size, 16); m == nil {
		t.Skipf("the filesystem of %s keeps no holes", root)
	}
	e := model.Entry{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: size, MTime: st.ModTime().UnixNano(), Nlink: 1}
	bs := wire.BlockSize(size)
	bl := &wire.BlockList{ID: 1, BlockSize: bs, Len: size, Hashes: make([]wire.Sum, wire.BlockCount(size, bs))}
	want := make([]wire.Sum, len(bl.Hashes))
	for k := range bl.Hashes {
		bl.Hashes[k], want[k] = wire.ZeroHash(bs), wire.ZeroHash(bs)
	}
	block := append(bytes.Clone(data), make([]byte, bs-int64(len(data)))...)
	want[at/bs] = wire.BlockHash(block)
	bl.Hashes[at/bs] = wire.BlockHash(bytes.Repeat([]byte("old "), int(bs/4)))
	bl.Hashes[20<<30/bs] = wire.BlockHash(bytes.Repeat([]byte("old "), int(bs/4))) // a hole at SRC
	var buf bytes.Buffer
	before := procIO(t, "rchar")
	w, err := Source{Root: root, Sparse: true}.WriteBatch(&buf, &wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}, []bool{true}, map[int]*wire.BlockList{0: bl}, nil, true)
	read := procIO(t, "rchar") - before
	if err != nil || len(w.Failed) > 0 {
		t.Fatalf("WriteBatch: %v %v", err, w.Failed)
	}
	t.Logf("64 GiB with 1 MiB of data: %d bytes read, %d of tar", read, buf.Len())
	if read > 16<<20 {
		t.Errorf("%d bytes read to send a delta of 1 MiB of data", read)
	}
	tr := tar.NewReader(&buf)
	tr.Next() // the batch's global header
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.PAXRecords[wire.PAXDelta], wire.FormatExtents([]wire.Extent{{Off: at, Len: bs}}); got != want {
		t.Errorf("delta map %q, want %q", got, want)
	}
	zero := wire.FormatExtents([]wire.Extent{{Off: 0, Len: at}, {Off: at + bs, Len: size - at - bs}})
	if got := h.PAXRecords[wire.PAXDeltaZero]; got != zero {
		t.Errorf("map of zeros %q, want %q", got, zero)
	}
	if got, _ := io.ReadAll(tr); !bytes.Equal(got, block) {
		t.Errorf("the entry carries %d bytes, not the changed block", len(got))
	}
	if len(w.Sums) != 1 || w.Sums[0].Sum != wire.DeltaSum(size, bs, want) {
		t.Errorf("sums %+v: not the delta's", w.Sums)
	}
	if len(w.Deltas) != 1 || w.Deltas[0].Sent != bs {
		t.Errorf("deltas %+v, want one block sent", w.Deltas)
	}
}

// TestDeltaChunks: SRC is read a chunk of blocks at a time
// (wire.ReadChunk), a hole cutting a chunk short: the blocks that differ
// on either side of the hole, at a chunk's edge and the last one, cut
// short, are the ones sent, the hole is named as zeros (DEST holds data
// in it), and the sum is that of every block's own hash.
func TestDeltaChunks(t *testing.T) {
	root := t.TempDir()
	bs := int64(wire.MinBlock)
	per := int64(wire.ChunkBlocks(bs))
	size := 3*per*bs + bs/3
	data := []struct{ from, to int64 }{{0, per/2 + 3}, {per + 5, 3*per + 1}} // blocks
	content := make([]byte, size)
	for i := range content {
		content[i] = byte(i*7 + i/4093)
	}
	for k := per/2 + 3; k < per+5; k++ {
		clear(content[k*bs : (k+1)*bs])
	}
	p := filepath.Join(root, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	for _, x := range data {
		f.WriteAt(content[x.from*bs:min(x.to*bs, size)], x.from*bs)
	}
	f.Close()
	if m := holes.Data(fdOf(t, p), 0, size, 16); len(m) != 2 {
		t.Skipf("the filesystem of %s keeps no holes", root)
	}
	st, _ := os.Stat(p)
	e := model.Entry{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: size, MTime: st.ModTime().UnixNano(), Nlink: 1}
	old := bytes.Clone(content)
	changed := []int64{2, per/2 + 2, per + 5, 2 * per, 2*per - 1, 3 * per}
	for _, k := range changed {
		old[k*bs] ^= 1
	}
	old[(per+1)*bs] = 1 // DEST holds data in SRC's hole
	n := wire.BlockCount(size, bs)
	bl := &wire.BlockList{ID: 1, BlockSize: bs, Len: size, Hashes: make([]wire.Sum, n)}
	want := make([]wire.Sum, n)
	for k := range n {
		b := min((k+1)*bs, size)
		bl.Hashes[k], want[k] = wire.BlockHash(old[k*bs:b]), wire.BlockHash(content[k*bs:b])
	}
	var buf bytes.Buffer
	w, err := Source{Root: root, Sparse: true}.WriteBatch(&buf, &wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}, []bool{true}, map[int]*wire.BlockList{0: bl}, nil, true)
	if err != nil || len(w.Failed) > 0 {
		t.Fatalf("WriteBatch: %v %v", err, w.Failed)
	}
	tr := tar.NewReader(&buf)
	tr.Next() // the batch's global header
	h, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	wantExt := []wire.Extent{{Off: 2 * bs, Len: bs}, {Off: (per/2 + 2) * bs, Len: bs}, {Off: (per + 5) * bs, Len: bs}, {Off: (2*per - 1) * bs, Len: 2 * bs}, {Off: 3 * per * bs, Len: size - 3*per*bs}}
	if got := h.PAXRecords[wire.PAXDelta]; got != wire.FormatExtents(wantExt) {
		t.Errorf("delta map %q, want %q", got, wire.FormatExtents(wantExt))
	}
	if got, want := h.PAXRecords[wire.PAXDeltaZero], wire.FormatExtents([]wire.Extent{{Off: (per/2 + 3) * bs, Len: (per/2 + 2) * bs}}); got != want {
		t.Errorf("map of zeros %q, want %q", got, want)
	}
	var sent []byte
	for _, x := range wantExt {
		sent = append(sent, content[x.Off:x.Off+x.Len]...)
	}
	if got, _ := io.ReadAll(tr); !bytes.Equal(got, sent) {
		t.Errorf("the entry carries %d bytes, not the %d of the changed blocks", len(got), len(sent))
	}
	if len(w.Sums) != 1 || w.Sums[0].Sum != wire.DeltaSum(size, bs, want) {
		t.Errorf("sums %+v: not the delta's", w.Sums)
	}
}

func fdOf(t *testing.T, p string) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// procIO is the count key of /proc/self/io: this process's reads so far.
func procIO(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+": "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Skipf("no %s in /proc/self/io", key)
	return 0
}

// TestPlanZerosBounded: a file of more runs of zeros than a map may name
// keeps those the receiver holds as zeros already; if still too many, its
// zeros go as bytes, the runs of bytes merged within their bound. Every
// block of zeros that differs is sent or named as zeros, and the maps
// stay within wire.MaxDeltaExtents.
func TestPlanZerosBounded(t *testing.T) {
	const bs = 1
	n := 3 * wire.MaxDeltaExtents // zeros every other block: 1.5 times too many runs
	for _, c := range []struct {
		name    string
		differs func(k int) bool
		zeros   bool // runs of zeros are left
	}{
		{"zeros held", func(k int) bool { return k%8 == 2 }, true},
		{"zeros changed", func(int) bool { return true }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			kind := make([]byte, n)
			for k := 0; k < n; k += 2 {
				kind[k] = blockZero
			}
			ext, zero := planZeros(kind, bs, int64(n), c.differs)
			if len(ext) > wire.MaxDeltaExtents || len(zero) > wire.MaxDeltaExtents {
				t.Fatalf("%d extents, %d of zeros", len(ext), len(zero))
			}
			if (len(zero) > 0) != c.zeros || c.zeros && len(ext) > 0 {
				t.Errorf("%d runs of zeros, %d sent", len(zero), len(ext))
			}
			in := func(m []wire.Extent, k int) bool {
				for _, x := range m {
					if int64(k) >= x.Off && int64(k) < x.Off+x.Len {
						return true
					}
				}
				return false
			}
			for k := 0; k < n; k++ {
				switch {
				case k%2 == 1 && in(zero, k):
					t.Fatalf("block %d of data named as zeros", k)
				case k%2 == 0 && c.differs(k) && in(ext, k) == in(zero, k):
					t.Fatalf("block %d of zeros that differs: sent %v, named zeros %v", k, in(ext, k), in(zero, k))
				}
			}
		})
	}
}
