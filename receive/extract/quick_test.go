//go:build linux

package extract

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestQuickCallsOnMemoryOnly: the receiver makes a new file's calls
// without the runtime's bookkeeping (dirat.Calls) only in a directory of
// its own memory filesystem: not on a disk, and not in another
// filesystem mounted beneath DEST, where a call might wait for a device
// and hold up the whole process. Either way the files land whole.
func TestQuickCallsOnMemoryOnly(t *testing.T) {
	type land struct {
		dir   string
		quick bool
	}
	cases := []struct {
		name  string
		dest  func(t *testing.T) string
		lands []land
	}{
		{"a directory on a disk", func(t *testing.T) string { return diskDir(t) }, []land{{"x", false}}},
		{"a memory filesystem", func(t *testing.T) string { return mountTmpfs(t) }, []land{{"x", true}, {"x/y", true}}},
		{"another filesystem mounted beneath", func(t *testing.T) string {
			dest := mountTmpfs(t)
			mountTmpfsAt(t, filepath.Join(dest, "sub"))
			return dest
		}, []land{{"x", true}, {"sub", false}, {"sub/z", false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := c.dest(t)
			r, err := Open(dest, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for k, l := range c.lands {
				b := newSmallBatch(t, uint64(k+1), l.dir, 3)
				txn, err := r.Receive(b.m, b.need, bytes.NewReader(b.tar))
				if err != nil {
					t.Fatal(err)
				}
				td := txn.dirs[l.dir]
				if td == nil {
					t.Fatalf("%s: no directory opened for it", l.dir)
				}
				if td.sys.IsQuick() != l.quick {
					t.Errorf("%s: quick calls %v, want %v", l.dir, td.sys.IsQuick(), l.quick)
				}
				if ack := txn.CommitSums(b.m.ID, nil, b.sums); len(ack.Errors) != 0 || ack.Files != 3 {
					t.Fatalf("%s: ack: %d files, errors %v", l.dir, ack.Files, ack.Errors)
				}
				for _, e := range b.m.Entries {
					got, err := os.ReadFile(filepath.Join(dest, e.Path))
					var st unix.Stat_t
					unix.Stat(filepath.Join(dest, e.Path), &st)
					if err != nil || string(got) != strings.Repeat("0123456789", 100) || st.Mtim.Nano() != e.MTime || st.Mode&0o7777 != 0o644 {
						t.Errorf("%s: %q (%v), mtime %d mode %o", e.Path, got, err, st.Mtim.Nano(), st.Mode&0o7777)
					}
				}
			}
		})
	}
}

// diskDir is a new directory on a filesystem other than tmpfs or ramfs:
// the test's temporary directory, or one in the working directory's (a
// module checkout) if that is on a memory filesystem too.
func diskDir(t *testing.T) string {
	for _, d := range []string{t.TempDir(), "."} {
		var fs unix.Statfs_t
		if unix.Statfs(d, &fs) == nil && fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC {
			if d == "." {
				var err error
				if d, err = os.MkdirTemp(".", "disk-"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(d) })
			}
			return d
		}
	}
	t.Skip("no disk filesystem to test on")
	return ""
}

// mountTmpfs mounts a new tmpfs (root only) and returns where.
func mountTmpfs(t *testing.T) string {
	d := t.TempDir()
	mountTmpfsAt(t, d)
	return d
}

func mountTmpfsAt(t *testing.T, d string) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(d, unix.MNT_DETACH) })
}
