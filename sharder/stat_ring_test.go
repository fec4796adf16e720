//go:build linux

package sharder

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/uring"
)

// TestLstatManyAsLstat: the walk's stats through io_uring say exactly what
// lstat says of every kind of name, a missing one included (same error).
func TestLstatManyAsLstat(t *testing.T) {
	if r := uring.Get(); r == nil {
		t.Skip("no io_uring here")
	} else {
		uring.Put(r, false)
	}
	dir := t.TempDir()
	mk := func(name string, mode os.FileMode, size int) {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("plain", 0o644, 1000)
	mk("empty", 0o600, 0)
	mk("setuid", 0o4755|os.ModeSetuid, 5)
	if err := os.Link(filepath.Join(dir, "plain"), filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "sub"), 0o1777|os.ModeSticky)
	if err := os.Symlink("plain", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	names := []string{"plain", "empty", "setuid", "hardlink", "sub", "link", "fifo", "missing"}
	if unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) == nil {
		names = append(names, "null")
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = withDir(f, dir, func(d dirHandle) {
		rs, errs := make([]rawStat, len(names)), make([]error, len(names))
		if !d.lstatMany(names, rs, errs) {
			t.Fatal("lstatMany: no ring")
		}
		for i, name := range names {
			want, werr := d.lstat(name)
			switch {
			case werr != nil || errs[i] != nil:
				var a, b *fs.PathError
				if !errors.As(werr, &a) || !errors.As(errs[i], &b) || *a != *b {
					t.Errorf("%s: through the ring %v, lstat %v", name, errs[i], werr)
				}
			case rs[i] != want:
				t.Errorf("%s: through the ring %+v\nlstat %+v", name, rs[i], want)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
