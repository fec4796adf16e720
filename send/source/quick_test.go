//go:build linux

package source

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// TestQuickCallsOnMemoryOnly: a file is read with dirat's quick calls
// only if the walk saw it on a memory filesystem, asked once per device;
// not a file on a disk, nor one whose device is not its directory's (a
// mount point), nor one the walk gave no device. Either way a batch reads
// the same.
func TestQuickCallsOnMemoryOnly(t *testing.T) {
	mem := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := unix.Mount("tmpfs", mem, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mem, unix.MNT_DETACH) })
	disk := t.TempDir()
	var fs unix.Statfs_t
	if unix.Statfs(disk, &fs) != nil || fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC {
		disk = "" // (no disk here: that case is left out)
	}
	for _, c := range []struct {
		root  string
		dev   func(st *unix.Stat_t) uint64
		quick bool
	}{
		{mem, func(st *unix.Stat_t) uint64 { return st.Dev }, true},
		{mem, func(st *unix.Stat_t) uint64 { return st.Dev + 1 }, false},
		{mem, func(st *unix.Stat_t) uint64 { return 0 }, false},
		{disk, func(st *unix.Stat_t) uint64 { return st.Dev }, false},
	} {
		if c.root == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(c.root, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		m, need := batchIn(t, c.root, 3)
		for i := range m.Entries {
			var st unix.Stat_t
			unix.Lstat(filepath.Join(c.root, m.Entries[i].Path), &st)
			m.Entries[i].Dev = c.dev(&st)
		}
		d := &Dirs{}
		s := Source{Root: c.root}
		var f File
		if err := s.openInto(&f, d, &m.Entries[0], false); err != nil {
			t.Fatal(err)
		}
		f.Close()
		d.Close()
		if f.sys.IsQuick() != c.quick {
			t.Errorf("%s, device %d: quick %v, want %v", c.root, m.Entries[0].Dev, f.sys.IsQuick(), c.quick)
		}
		var buf bytes.Buffer
		var ctr metrics.Stream
		if _, failed, _, err := s.writeTar(&buf, m, need, &ctr, true); err != nil || len(failed) != 0 {
			t.Fatalf("writeTar: %v %v", err, failed)
		}
		tr := tar.NewReader(&buf)
		files := 0
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			b, _ := io.ReadAll(tr)
			if want := "content of " + h.Name; string(b) != want {
				t.Errorf("%s: %q, want %q", h.Name, b, want)
			}
			files++
		}
		if files != 3 {
			t.Errorf("%s: %d files in the tar, want 3", c.root, files)
		}
	}
}

// batchIn writes n files under root/d and returns their batch.
func batchIn(t *testing.T, root string, n int) (*wire.BatchManifest, []bool) {
	m := &wire.BatchManifest{ID: 1}
	for i := range n {
		p := "d/f" + string(rune('a'+i))
		name := filepath.Join(root, p)
		if err := os.WriteFile(name, []byte("content of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		unix.Lstat(name, &st)
		m.Entries = append(m.Entries, model.Entry{Path: p, Kind: model.KindFile, Mode: 0o644, Size: st.Size, MTime: st.Mtim.Nano(), Nlink: 1})
	}
	need := make([]bool, n)
	for i := range need {
		need[i] = true
	}
	return m, need
}
