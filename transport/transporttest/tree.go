package transporttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// splitSize is the suite's split size: Tree's large file is cut into
// several ranges, which travel as batches of their own.
const splitSize = 256 << 10

// bigSize is the size of Tree's large file: six ranges, the last shorter.
const bigSize = 5*splitSize + 12345

// smallFiles is how many small files Tree holds: with the suite's
// batches of 8 files, enough batches for every stream to have some in
// flight when one is cut or stalled.
const smallFiles = 160

// Tree writes the suite's tree at root: a file of every size from empty
// to split in ranges, executable and read-only files, directories with
// their own modes and mtimes, an empty directory, relative and dangling
// symlinks, and a file with two names in different directories. Every
// mtime has nanoseconds; directory modes and mtimes are set last, deepest
// first, so that nothing written later changes them.
func Tree(root string) error {
	base := time.Date(2024, 3, 1, 12, 0, 0, 123456789, time.UTC)
	step := 0
	stamp := func(p string) error {
		step++
		t := base.Add(time.Duration(step)*time.Minute + time.Duration(step)*time.Nanosecond)
		return os.Chtimes(p, t, t)
	}
	dirs := []struct {
		path string
		mode os.FileMode
	}{
		{".", 0o755}, {"a", 0o755}, {"a/b", 0o750}, {"a/b/c", 0o700},
		{"empty", 0o711}, {"links", 0o755}, {"many", 0o755},
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d.path), 0o755); err != nil {
			return err
		}
	}
	write := func(rel string, data []byte, mode os.FileMode) error {
		p := filepath.Join(root, rel)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return stamp(p)
	}
	files := []struct {
		path string
		size int
		mode os.FileMode
	}{
		{"a/empty", 0, 0o644},
		{"a/one", 1, 0o644},
		{"a/run.sh", 700, 0o755},
		{"a/readonly", 4096, 0o444},
		{"a/b/c/deep", 70000, 0o600},
		{"big", bigSize, 0o644},
		{"a/linked", 3000, 0o640},
	}
	for i, f := range files {
		if err := write(f.path, content(i, f.size), f.mode); err != nil {
			return err
		}
	}
	for i := range smallFiles {
		rel := fmt.Sprintf("many/f%03d", i)
		if err := write(rel, content(100+i, 1000+(i*7919)%30000), 0o644); err != nil {
			return err
		}
	}
	// A second name of a/linked, in another directory.
	if err := os.Link(filepath.Join(root, "a/linked"), filepath.Join(root, "links/hard")); err != nil {
		return err
	}
	for _, l := range []struct{ path, target string }{
		{"links/rel", "../a/one"},
		{"links/dir", "../a/b"},
		{"links/dangling", "nowhere/at/all"},
	} {
		p := filepath.Join(root, l.path)
		if err := os.Symlink(l.target, p); err != nil {
			return err
		}
		t := base.Add(-time.Duration(len(l.path)) * time.Hour)
		if err := lutimes(p, t); err != nil {
			return err
		}
	}
	// Deepest first: setting a directory's mtime is the last thing done
	// in it.
	slices.SortFunc(dirs, func(a, b struct {
		path string
		mode os.FileMode
	}) int {
		return strings.Count(b.path, "/") - strings.Count(a.path, "/")
	})
	for _, d := range dirs {
		p := filepath.Join(root, d.path)
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
		if err := stamp(p); err != nil {
			return err
		}
	}
	return nil
}

// content is n bytes of file i: different for each file, and compressing
// a little, as real data does.
func content(i, n int) []byte {
	b := make([]byte, n)
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	for k := range b {
		if k%64 < 16 {
			b[k] = byte('a' + k%26) // a compressible run
			continue
		}
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[k] = byte(x)
	}
	return b
}

// lutimes sets a symlink's own times.
func lutimes(p string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lutimes", Path: p, Err: err}
	}
	return nil
}
