package holes

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/wire"
)

// TestExtentsCoarsened: a file of more extents than a map may hold is sent
// with the smallest holes filled: every data byte is in an extent, and
// there are at most wire.MaxExtents.
func TestExtentsCoarsened(t *testing.T) {
	p := filepath.Join(t.TempDir(), "holes")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n, step = wire.MaxExtents + 500, 64 << 10
	for i := range n {
		f.WriteAt([]byte{1}, int64(i)*step)
	}
	size := int64(n) * step
	f.Truncate(size)
	ext := Data(int(f.Fd()), 0, size, wire.MaxExtents)
	if ext == nil {
		t.Skip("the filesystem keeps no holes")
	}
	if len(ext) > wire.MaxExtents {
		t.Fatalf("%d extents", len(ext))
	}
	k := 0
	for i := range n {
		off := int64(i) * step
		for k < len(ext) && ext[k].Off+ext[k].Len <= off {
			k++
		}
		if k == len(ext) || ext[k].Off > off {
			t.Fatalf("the byte at %d is in no extent", off)
		}
	}
	if _, _, err := wire.ParseExtents(wire.FormatExtents(ext), size); err != nil {
		t.Errorf("the map does not read back: %v", err)
	}
	if pos, _ := unix.Seek(int(f.Fd()), 0, 1); pos != 0 {
		t.Errorf("the file's offset is left at %d, not 0", pos)
	}
}

// TestIn: a span lies in a hole only if no data extent touches it; a
// range of the file is mapped from its own offset; a file without holes
// has no map.
func TestIn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const mb = 1 << 20
	f.WriteAt(make([]byte, mb), 2*mb) // data at [2 MiB, 3 MiB)
	f.Truncate(8 * mb)
	data := Data(int(f.Fd()), 0, 8*mb, 16)
	if data == nil {
		t.Skip("the filesystem keeps no holes")
	}
	for _, c := range []struct {
		off, n int64
		hole   bool
	}{
		{0, mb, true}, {0, 2 * mb, true}, {0, 2*mb + 1, false}, {2 * mb, mb, false},
		{3*mb - 1, 1, false}, {3 * mb, mb, true}, {7 * mb, mb, true},
	} {
		if got := In(data, c.off, c.n); got != c.hole {
			t.Errorf("In(%d+%d) = %v, want %v (map %v)", c.off, c.n, got, c.hole, data)
		}
	}
	if r := Data(int(f.Fd()), 4*mb, 8*mb, 16); r == nil || len(r) != 0 {
		t.Errorf("the map of [4 MiB, 8 MiB), all hole: %v, want empty", r)
	}
	if r := Data(int(f.Fd()), 2*mb, 3*mb, 16); r != nil {
		t.Errorf("the map of [2 MiB, 3 MiB), all data: %v, want nil", r)
	}
	if In(nil, 0, 1) {
		t.Error("a file without a map has a hole")
	}
}

// TestDenseNoSeek: a file without holes is known as one from its blocks,
// with no lseek: SEEK_HOLE would look through the rest of the file for
// its first hole (every page of it on a tmpfs), for each range asked
// about. A sparse file is still mapped.
func TestDenseNoSeek(t *testing.T) {
	calls := 0
	defer func(s func(int, int64, int) (int64, error)) { seek = s }(seek)
	seek = func(fd int, off int64, whence int) (int64, error) {
		calls++
		return unix.Seek(fd, off, whence)
	}
	dir := t.TempDir()
	dense, err := os.Create(filepath.Join(dir, "dense"))
	if err != nil {
		t.Fatal(err)
	}
	defer dense.Close()
	const size = 4 << 20
	dense.Write(make([]byte, size))
	for off := int64(0); off < size; off += 1 << 20 {
		if ext := Data(int(dense.Fd()), off, off+1<<20, 16); ext != nil {
			t.Fatalf("a file without holes mapped as %v", ext)
		}
	}
	if calls != 0 {
		t.Errorf("%d lseek calls for a file without holes", calls)
	}
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer sparse.Close()
	sparse.WriteAt([]byte("data"), 2<<20)
	sparse.Truncate(size)
	ext := Data(int(sparse.Fd()), 0, size, 16)
	if ext == nil {
		t.Skip("the filesystem keeps no holes")
	}
	if len(ext) != 1 || ext[0].Off > 2<<20 || ext[0].Off+ext[0].Len < 2<<20+4 || calls == 0 {
		t.Errorf("the sparse file's data mapped as %v (%d lseek calls)", ext, calls)
	}
}
