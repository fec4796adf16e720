package source

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/iocount"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestSparseOnTheWire: a 256 MiB file holding 3 MiB of data in three
// extents, with an extended attribute, goes as about 3 MiB of tar (its map
// and attribute in its header) with an end-to-end sum that the receiver
// agrees with, and lands with the same content taking about 3 MiB.
func TestSparseOnTheWire(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	const size = 256 << 20
	f, err := os.Create(filepath.Join(src, "vm.img"))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for _, off := range []int64{0, 100 << 20, size - 1<<20} {
		rand.Read(data)
		f.WriteAt(data, off)
	}
	f.Truncate(size)
	f.Close()
	hasXattr := unix.Setxattr(filepath.Join(src, "vm.img"), "user.kind", []byte("disk"), 0) == nil
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(src, "vm.img"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 8<<20 {
		t.Skipf("the filesystem of %s does not keep holes (%d bytes used)", src, st.Blocks*512)
	}
	e := model.Entry{Path: "vm.img", Kind: model.KindFile, Mode: 0o644, Size: size, MTime: st.Mtim.Nano(), Nlink: 1}
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}

	s := Source{Root: src, Xattrs: true, Sparse: true}
	var buf bytes.Buffer
	cw := &iocount.Writer{W: &buf}
	discards, failed, sums, err := s.writeTar(cw, m, []bool{true}, nil, true)
	if err != nil || len(discards) > 0 || len(failed) > 0 || len(sums) != 1 {
		t.Fatalf("writeTar: %v, %v, %v, %d sums", err, discards, failed, len(sums))
	}
	t.Logf("256 MiB file with 3 MiB of data: %d bytes of tar", cw.N)
	if cw.N > 3<<20+16<<10 {
		t.Errorf("%d bytes on the wire for 3 MiB of data", cw.N)
	}

	r, err := extract.Open(dst, extract.Options{Xattrs: true, Sparse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	txn, err := r.Receive(m, []bool{true}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if ack := txn.CommitSums(1, nil, sums); len(ack.Errors) > 0 || ack.Files != 1 {
		t.Fatalf("ack: %+v", ack)
	}
	same(t, filepath.Join(src, "vm.img"), filepath.Join(dst, "vm.img"))
	var got unix.Stat_t
	unix.Stat(filepath.Join(dst, "vm.img"), &got)
	t.Logf("at the destination: %d bytes, %d on disk", got.Size, got.Blocks*512)
	if got.Size != size || got.Blocks*512 > 4<<20 {
		t.Errorf("vm.img: %d bytes taking %d on disk; want %d taking about 3 MiB", got.Size, got.Blocks*512, size)
	}
	if hasXattr {
		b := make([]byte, 16)
		if n, err := unix.Getxattr(filepath.Join(dst, "vm.img"), "user.kind", b); err != nil || string(b[:n]) != "disk" {
			t.Errorf("user.kind of vm.img: %q, %v", b[:n], err)
		}
	}
}

// same compares two files in chunks.
func same(t *testing.T, a, b string) {
	t.Helper()
	fa, _ := os.Open(a)
	fb, _ := os.Open(b)
	defer fa.Close()
	defer fb.Close()
	x, y := make([]byte, 4<<20), make([]byte, 4<<20)
	for off := int64(0); ; off += int64(len(x)) {
		n, _ := fa.ReadAt(x, off)
		m, _ := fb.ReadAt(y, off)
		if n != m || !bytes.Equal(x[:n], y[:m]) {
			t.Fatalf("%s and %s differ at %d..%d", a, b, off, off+int64(len(x)))
		}
		if n == 0 {
			return
		}
	}
}
