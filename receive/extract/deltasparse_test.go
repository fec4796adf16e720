package extract_test

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// rchar is the bytes this process has read so far (/proc/self/io).
func rchar(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// TestDeltaSparseBase: DEST's 64 GiB image holding 1.5 MiB of data is
// copied and hashed for the delta without its holes being read, copied
// or counted against the free space: the copy takes what DEST's file
// takes, the blocks of holes hash as zeros, and the data blocks as their
// bytes.
func TestDeltaSparseBase(t *testing.T) {
	s := newSandbox(t)
	const size = 64 << 30
	p := filepath.Join(s.root, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("data"), 1<<18) // 1 MiB
	f.WriteAt(data, 10<<30)
	f.WriteAt(data[:512<<10], size-512<<10)
	f.Truncate(size)
	f.Close()
	if a, _ := allocated(t, p); a > 4<<20 {
		t.Skipf("the filesystem of %s keeps no holes (%d bytes taken)", s.root, a)
	}
	defer extract.SetDeltaFree(1 << 30)() // room for the data, not the size
	r := s.open(t, extract.Options{DeltaMin: 1})
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", size)}}
	need := r.Need(m.Entries)
	before := rchar(t)
	d := r.PrepareDeltas(m.Entries, need)
	read := rchar(t) - before
	lists := d.Lists(m.ID, len(m.Entries))
	if !need[0] || len(lists) != 1 {
		t.Fatalf("need %v, %d block lists: want the file, with its block list", need, len(lists))
	}
	t.Logf("64 GiB with 1.5 MiB of data: %d bytes read to copy and hash it", read)
	if read > 16<<20 {
		t.Errorf("%d bytes read to copy and hash 1.5 MiB of data", read)
	}
	tmp := temporaries(t, s.root)
	if len(tmp) != 1 {
		t.Fatalf("temporaries %v, want the copy", tmp)
	}
	if a, _ := allocated(t, tmp[0]); a > 4<<20 {
		t.Errorf("the copy takes %d bytes, for 1.5 MiB of data", a)
	}
	bl := lists[0]
	bs := bl.BlockSize
	block := func(off int64) []byte { // the file's block at off
		b := make([]byte, bs)
		for _, x := range []struct {
			at int64
			p  []byte
		}{{10 << 30, data}, {size - 512<<10, data[:512<<10]}} {
			if x.at < off+bs && x.at+int64(len(x.p)) > off {
				lo := max(x.at, off)
				copy(b[lo-off:], x.p[lo-x.at:])
			}
		}
		return b
	}
	for k, h := range bl.Hashes {
		off := int64(k) * bs
		want := wire.ZeroHash(bs)
		if off+bs > 10<<30 && off < 10<<30+1<<20 || off+bs > size-512<<10 {
			want = wire.BlockHash(block(off))
		}
		if h != want {
			t.Fatalf("block %d of %d bytes at %d: hash %x, want %x", k, bs, off, h, want)
		}
	}
	d.Close()
	if tmp := temporaries(t, s.root); len(tmp) > 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}

// TestDeltaZeroBlocks: blocks a delta names as zeros (SRC's holes) carry
// no bytes and become holes where DEST held data, as do the pages of
// zeros of a block sent (with --sparse); a sender that names as
// zeros a block whose data it hashed is caught by the end-to-end sum:
// nothing is installed (maps of zeros that break the rules:
// TestDeltaHostileMap).
func TestDeltaZeroBlocks(t *testing.T) {
	const size = 8 * wire.MinBlock // 8 blocks
	bs := int64(wire.MinBlock)
	old := bytes.Repeat([]byte("old "), size/4)
	content := bytes.Clone(old)
	clear(content[3*bs : 5*bs]) // a hole punched at SRC
	copy(content[6*bs:], "new")
	clear(content[7*bs:]) // and a block of some data beside a hole
	copy(content[7*bs:], "new")
	zero := []wire.Extent{{Off: 3 * bs, Len: 2 * bs}}
	ext := []wire.Extent{{Off: 6 * bs, Len: 2 * bs}}
	zeroRec := func(z []wire.Extent) map[string]string {
		return map[string]string{wire.PAXDeltaZero: wire.FormatExtents(z)}
	}
	t.Run("holes", func(t *testing.T) {
		s := newSandbox(t)
		r, m, need, d, bl := deltaDest(t, s, old, size, extract.Options{DeltaMin: 1, Sparse: true})
		stream, sum := deltaSenderRec(t, m.ID, "f", content, bl, ext, zeroRec(zero))
		if len(stream) > 2*int(bs)+4096 {
			t.Errorf("the delta's tar stream is %d bytes, want two blocks' and a header", len(stream))
		}
		tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		if ack := tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}}); len(ack.Errors) > 0 || ack.Files != 1 {
			t.Fatalf("ack %+v", ack)
		}
		p := filepath.Join(s.root, "f")
		if got, _ := os.ReadFile(p); !bytes.Equal(got, content) {
			t.Fatal("DEST does not hold the new content")
		}
		// Blocks 0-2, 5 and 6, and a page of block 7.
		if a, _ := allocated(t, p); a > 5*bs+8<<10 {
			t.Errorf("f takes %d bytes, want at most %d: the zeros are not holes", a, 5*bs+8<<10)
		}
	})
	t.Run("zeros claimed over data", func(t *testing.T) {
		s := newSandbox(t)
		r, m, need, d, bl := deltaDest(t, s, old, size)
		// Block 6 changed, but the sender names it zeros and sends none
		// of it; its sum is of the data it hashed.
		stream, sum := deltaSenderRec(t, m.ID, "f", content, bl, []wire.Extent{}, zeroRec([]wire.Extent{{Off: 3 * bs, Len: 4 * bs}}))
		tx, err := r.ReceiveDeltas(m, need, d, bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		ack := tx.CommitSums(m.ID, nil, []wire.IndexedSum{{Index: 0, Sum: sum}})
		if len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeCorrupt {
			t.Fatalf("ack errors %+v, want the entry corrupt", ack.Errors)
		}
		keptOld(t, s, old)
	})
}

// keptOld fails t unless DEST's f is old and no temporary is left.
func keptOld(t *testing.T, s *sandbox, old []byte) {
	t.Helper()
	if got, _ := os.ReadFile(filepath.Join(s.root, "f")); !bytes.Equal(got, old) {
		t.Fatal("DEST's file changed")
	}
	if tmp := temporaries(t, s.root); len(tmp) > 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}

// wholeWith is a batch's tar stream of the file name sent whole, with the
// PAX records rec.
func wholeWith(tb testing.TB, id uint64, name string, content []byte, rec map[string]string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{wire.PAXBatch: strconv.FormatUint(id, 10)}})
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, mtime),
		PAXRecords: rec, Format: tar.FormatPAX}); err != nil {
		tb.Fatal(err)
	}
	tw.Write(content)
	tw.Close()
	return buf.Bytes()
}

// TestDeltaZeroRange: the ranges of a split file whose blocks became
// zeros carry none of their bytes: the partial gets holes there and the
// blocks that did not change from DEST's file, and the file lands whole,
// taking less room.
func TestDeltaZeroRange(t *testing.T) {
	const size, split = 4<<20 + 1000, 2 << 20
	bs := int64(wire.BlockSize(size))
	old := bytes.Repeat([]byte("old data"), size/8+1)[:size]
	content := bytes.Clone(old)
	clear(content[2*bs : 4*bs])           // in the first range
	clear(content[split+bs : split+2*bs]) // in the second
	copy(content[split+5*bs+7:], "new")
	s := newSandbox(t)
	if err := os.WriteFile(filepath.Join(s.root, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, extract.Options{DeltaMin: 1})
	carried := landRanges(t, r, content, split, func(_, l int64, part []byte, bl *wire.BlockList) ([]wire.Extent, map[string]string) {
		ext, zero := []wire.Extent{}, []wire.Extent(nil)
		for b := int64(0); b < l; b += bs {
			p := part[b:min(b+bs, l)]
			switch h := wire.BlockHash(p); {
			case !bl.Differs(int(b/bs), l, h):
			case h == wire.ZeroHash(int64(len(p))):
				zero = appendBlock(zero, b, int64(len(p)))
			default:
				ext = appendBlock(ext, b, int64(len(p)))
			}
		}
		return ext, map[string]string{wire.PAXDeltaZero: wire.FormatExtents(zero)}
	})
	p := filepath.Join(s.root, "f")
	if got, _ := os.ReadFile(p); !bytes.Equal(got, content) {
		t.Fatal("DEST does not hold the new content")
	}
	if max := int(bs) + 3*4096; carried > max {
		t.Errorf("%d bytes carried, want at most %d: the changed block and headers", carried, max)
	}
	if a, _ := allocated(t, p); a > size-2*bs {
		t.Errorf("f takes %d bytes of %d: the blocks of zeros are not holes", a, size)
	}
	if tmp := temporaries(t, s.root); len(tmp) > 0 {
		t.Errorf("temporaries left: %v", tmp)
	}
}

// TestDeltaHashChunks: DEST's file is read a chunk of blocks at a time
// (wire.ReadChunk), a hole cutting a chunk short: every block's hash is
// still its own bytes' (zeros in the hole), the last one cut short too.
func TestDeltaHashChunks(t *testing.T) {
	s := newSandbox(t)
	bs := int64(wire.MinBlock)
	per := int64(wire.ChunkBlocks(bs))
	size := 3*per*bs + bs/3 // three chunks and a third of a block
	rb := randFunc(7, 8)
	content := make([]byte, size)
	for _, x := range []struct{ from, to int64 }{{0, per/2 + 3}, {per + 5, 3*per + 1}} {
		copy(content[x.from*bs:], rb(int(min(x.to*bs, size)-x.from*bs)))
	}
	p := filepath.Join(s.root, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	for _, x := range []struct{ from, to int64 }{{0, per/2 + 3}, {per + 5, 3*per + 1}} {
		f.WriteAt(content[x.from*bs:min(x.to*bs, size)], x.from*bs)
	}
	f.Close()
	r := s.open(t, extract.Options{DeltaMin: 1})
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{fileE("f", size)}}
	need := r.Need(m.Entries)
	d := r.PrepareDeltas(m.Entries, need)
	defer d.Close()
	lists := d.Lists(m.ID, len(m.Entries))
	if len(lists) != 1 || lists[0].BlockSize != bs || lists[0].Len != size {
		t.Fatalf("block lists %+v, want one of %d bytes in blocks of %d", lists, size, bs)
	}
	for k, h := range lists[0].Hashes {
		off := int64(k) * bs
		if want := wire.BlockHash(content[off:min(off+bs, size)]); h != want {
			t.Fatalf("block %d of %d at %d: hash %x, want %x", k, len(lists[0].Hashes), off, h, want)
		}
	}
}
