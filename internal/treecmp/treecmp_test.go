package treecmp

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var base = time.Date(2023, 5, 17, 10, 20, 30, 123456789, time.UTC)

// build creates the reference tree under dir:
//
//	a/b.txt  a/big (200 KiB)  a/sub/c (empty)  a/hl2 (hard link of hl1)
//	empty/  hl1  link -> a/b.txt  dirlink -> a  x (mode 0640)  a/sub mode 0750
func build(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a", "sub"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a", "b.txt"), []byte("hello, world\n"), 0o644))
	big := bytes.Repeat([]byte("0123456789abcdef"), 200*1024/16)
	must(os.WriteFile(filepath.Join(dir, "a", "big"), big, 0o644))
	must(os.WriteFile(filepath.Join(dir, "a", "sub", "c"), nil, 0o644))
	must(os.WriteFile(filepath.Join(dir, "hl1"), []byte("linked\n"), 0o644))
	must(os.Link(filepath.Join(dir, "hl1"), filepath.Join(dir, "a", "hl2")))
	must(os.Symlink("a/b.txt", filepath.Join(dir, "link")))
	must(os.Symlink("a", filepath.Join(dir, "dirlink")))
	must(os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644))
	must(os.Chmod(filepath.Join(dir, "x"), 0o640))
	must(os.Chmod(filepath.Join(dir, "a", "sub"), 0o750))
	must(os.Chmod(dir, 0o755)) // whatever the umask
	setTimes(t, dir)
}

// setTimes gives every name under root (root included) a deterministic mtime,
// directories last so that nothing disturbs them.
func setTimes(t *testing.T, root string) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return setTime(root, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(dirs)
	for _, p := range dirs {
		if err := setTime(root, p); err != nil {
			t.Fatal(err)
		}
	}
}

// setTime gives regular files one fixed time (so that the names of a hard
// link agree), and everything else a time derived from its path.
func setTime(root, p string) error {
	mt := base
	if fi, err := os.Lstat(p); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		rel, _ := filepath.Rel(root, p)
		h := fnv.New64a()
		h.Write([]byte(rel))
		mt = base.Add(time.Duration(h.Sum64()%1000) * time.Hour)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func pair(t *testing.T) (src, dst string) {
	src, dst = filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	build(t, src)
	build(t, dst)
	return src, dst
}

func check(t *testing.T, src, dst string, opt Options, want ...string) {
	t.Helper()
	diffs, err := Compare(src, dst, opt)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diffs {
		got = append(got, d.Path+" "+d.What)
	}
	if !slices.Equal(got, want) {
		t.Errorf("diffs:\n%s\nwant %q", Format(diffs, 0), want)
	}
}

func TestIdentical(t *testing.T) {
	src, dst := pair(t)
	check(t, src, dst, Options{})
	check(t, src, dst, Options{SymlinkMtime: true})
	check(t, src, dst, Options{Owner: true})
	Equal(t, src, dst)
}

func TestDifferences(t *testing.T) {
	type tc struct {
		name   string
		mutate func(t *testing.T, src, dst string) // times are reset after it, unless keepTimes
		keep   bool
		opt    Options
		want   []string
	}
	p := func(root string, rel ...string) string { return filepath.Join(append([]string{root}, rel...)...) }
	do := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cases := []tc{
		{name: "missing file", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "a", "b.txt")))
		}, want: []string{"a/b.txt missing"}},
		{name: "missing empty dir", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "empty")))
		}, want: []string{"empty missing"}},
		{name: "missing subtree", mutate: func(t *testing.T, src, dst string) {
			do(t, os.RemoveAll(p(dst, "a", "sub")))
		}, want: []string{"a/sub missing"}},
		{name: "extra", mutate: func(t *testing.T, src, dst string) {
			do(t, os.WriteFile(p(dst, "a", "new"), nil, 0o644))
		}, want: []string{"a/new extra"}},
		{name: "extra allowed", mutate: func(t *testing.T, src, dst string) {
			do(t, os.WriteFile(p(dst, "a", "new"), nil, 0o644))
			do(t, os.Mkdir(p(dst, "newdir"), 0o755))
		}, opt: Options{AllowExtra: true}},
		{name: "type", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "x")))
			do(t, os.Mkdir(p(dst, "x"), 0o640))
		}, want: []string{"x type"}},
		{name: "symlink instead of file", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "x")))
			do(t, os.Symlink("a/b.txt", p(dst, "x")))
		}, want: []string{"x type"}},
		{name: "size", mutate: func(t *testing.T, src, dst string) {
			do(t, os.WriteFile(p(dst, "a", "b.txt"), []byte("hello, world!\n"), 0o644))
		}, want: []string{"a/b.txt size"}},
		{name: "content", mutate: func(t *testing.T, src, dst string) {
			do(t, os.WriteFile(p(dst, "a", "b.txt"), []byte("hello, World\n"), 0o644))
		}, want: []string{"a/b.txt content"}},
		{name: "content deep in a large file", mutate: func(t *testing.T, src, dst string) {
			f, err := os.OpenFile(p(dst, "a", "big"), os.O_WRONLY, 0)
			do(t, err)
			_, err = f.WriteAt([]byte{'X'}, 150_001)
			do(t, err)
			do(t, f.Close())
		}, want: []string{"a/big content"}},
		{name: "hard-linked content", mutate: func(t *testing.T, src, dst string) {
			do(t, os.WriteFile(p(dst, "hl1"), []byte("LINKED\n"), 0o644))
		}, want: []string{"a/hl2 content", "hl1 content"}},
		{name: "file mode", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(p(dst, "x"), 0o600))
		}, want: []string{"x mode"}},
		{name: "dir mode", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(p(dst, "a", "sub"), 0o755))
		}, want: []string{"a/sub mode"}},
		{name: "root mode", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(dst, 0o700))
		}, want: []string{". mode"}},
		{name: "setuid", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(p(src, "x"), 0o640|fs.ModeSetuid))
		}, want: []string{"x mode"}},
		{name: "sticky", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(p(src, "empty"), 0o755|fs.ModeSticky))
		}, want: []string{"empty mode"}},
		{name: "setuid masked", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(p(src, "x"), 0o640|fs.ModeSetuid))
		}, opt: Options{ModeMask: 0o777}},
		{name: "mode ignored", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chmod(p(dst, "x"), 0o600))
		}, opt: Options{IgnoreMode: true}},
		{name: "file mtime by a nanosecond", keep: true, mutate: func(t *testing.T, src, dst string) {
			fi, err := os.Stat(p(dst, "x"))
			do(t, err)
			do(t, os.Chtimes(p(dst, "x"), time.Time{}, fi.ModTime().Add(time.Nanosecond)))
		}, want: []string{"x mtime"}},
		{name: "file mtime within precision", keep: true, mutate: func(t *testing.T, src, dst string) {
			fi, err := os.Stat(p(dst, "x"))
			do(t, err)
			do(t, os.Chtimes(p(dst, "x"), time.Time{}, fi.ModTime().Add(time.Nanosecond)))
		}, opt: Options{MtimePrecision: time.Second}},
		{name: "mtime ignored", keep: true, mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chtimes(p(dst, "x"), time.Time{}, base))
			do(t, os.Chtimes(p(dst, "a"), time.Time{}, base))
		}, opt: Options{IgnoreMtime: true}},
		{name: "dir mtime", keep: true, mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chtimes(p(dst, "a", "sub"), time.Time{}, base))
		}, want: []string{"a/sub mtime"}},
		{name: "root mtime", keep: true, mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chtimes(dst, time.Time{}, base))
		}, want: []string{". mtime"}},
		{name: "dir mtime ignored", keep: true, mutate: func(t *testing.T, src, dst string) {
			do(t, os.Chtimes(dst, time.Time{}, base))
			do(t, os.Chtimes(p(dst, "empty"), time.Time{}, base))
		}, opt: Options{IgnoreDirMtime: true}},
		{name: "dir mtime disturbed by a write", keep: true, mutate: func(t *testing.T, src, dst string) {
			do(t, os.WriteFile(p(dst, "a", "tmp"), nil, 0o644))
			do(t, os.Remove(p(dst, "a", "tmp")))
		}, want: []string{"a mtime"}},
		{name: "symlink mtime not compared by default", keep: true, mutate: func(t *testing.T, src, dst string) {
			ts := []unix.Timespec{unix.NsecToTimespec(0), unix.NsecToTimespec(0)}
			do(t, unix.UtimesNanoAt(unix.AT_FDCWD, p(dst, "link"), ts, unix.AT_SYMLINK_NOFOLLOW))
		}},
		{name: "symlink mtime", keep: true, mutate: func(t *testing.T, src, dst string) {
			ts := []unix.Timespec{unix.NsecToTimespec(0), unix.NsecToTimespec(0)}
			do(t, unix.UtimesNanoAt(unix.AT_FDCWD, p(dst, "link"), ts, unix.AT_SYMLINK_NOFOLLOW))
		}, opt: Options{SymlinkMtime: true}, want: []string{"link mtime"}},
		{name: "symlink target", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "link")))
			do(t, os.Symlink("a/../a/b.txt", p(dst, "link")))
		}, want: []string{"link link"}},
		{name: "hard link broken in dst", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "a", "hl2")))
			do(t, os.WriteFile(p(dst, "a", "hl2"), []byte("linked\n"), 0o644))
		}, want: []string{"a/hl2 hardlink"}},
		{name: "hard link only in dst", mutate: func(t *testing.T, src, dst string) {
			// a/b.txt and x get the same content and mode on both sides,
			// but only in dst are they one file.
			for _, root := range []string{src, dst} {
				do(t, os.WriteFile(p(root, "a", "b.txt"), []byte("x"), 0o640))
				do(t, os.Chmod(p(root, "a", "b.txt"), 0o640))
			}
			do(t, os.Remove(p(dst, "x")))
			do(t, os.Link(p(dst, "a", "b.txt"), p(dst, "x")))
		}, want: []string{"a/b.txt hardlink"}},
		{name: "hard link with a skipped name", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "a", "hl2")))
		}, opt: Options{Skip: func(p string) bool { return p == "a/hl2" }}},
		{name: "hard links ignored", mutate: func(t *testing.T, src, dst string) {
			do(t, os.Remove(p(dst, "a", "hl2")))
			do(t, os.WriteFile(p(dst, "a", "hl2"), []byte("linked\n"), 0o644))
		}, opt: Options{IgnoreHardlinks: true}},
		{name: "skip", mutate: func(t *testing.T, src, dst string) {
			do(t, os.RemoveAll(p(dst, "a")))
			do(t, os.WriteFile(p(dst, "junk"), nil, 0o644))
		}, opt: Options{Skip: func(p string) bool { return p == "a" || p == "junk" || p == "hl1" }}},
	}
	if os.Geteuid() == 0 {
		cases = append(cases,
			tc{name: "owner", mutate: func(t *testing.T, src, dst string) {
				do(t, os.Lchown(p(dst, "x"), 1234, 5678))
				do(t, os.Lchown(p(dst, "link"), 1234, 5678))
			}, opt: Options{Owner: true}, want: []string{"link owner", "x owner"}},
			tc{name: "owner not compared by default", mutate: func(t *testing.T, src, dst string) {
				do(t, os.Lchown(p(dst, "x"), 1234, 5678))
			}},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := pair(t)
			c.mutate(t, src, dst)
			if !c.keep {
				setTimes(t, src)
				setTimes(t, dst)
			}
			check(t, src, dst, c.opt, c.want...)
		})
	}
}

func TestManyDiffsSorted(t *testing.T) {
	src, dst := pair(t)
	for i := range 30 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("m%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dst, "x"), 0o600); err != nil {
		t.Fatal(err)
	}
	setTimes(t, src)
	setTimes(t, dst)
	diffs, err := Compare(src, dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 31 {
		t.Fatalf("got %d diffs, want 31:\n%s", len(diffs), Format(diffs, 0))
	}
	if !slices.IsSortedFunc(diffs, func(a, b Diff) int { return strings.Compare(a.Path, b.Path) }) {
		t.Errorf("diffs not sorted:\n%s", Format(diffs, 0))
	}

	rec := &recorder{TB: t}
	if Equal(rec, src, dst) {
		t.Fatal("Equal reported equal trees")
	}
	msg := strings.Join(rec.errs, "\n")
	if n := strings.Count(msg, ": missing: "); n != MaxReported {
		t.Errorf("Equal listed %d diffs, want %d:\n%s", n, MaxReported, msg)
	}
	if !strings.Contains(msg, "... and 11 more") {
		t.Errorf("Equal did not summarise the rest:\n%s", msg)
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestRoots(t *testing.T) {
	src, _ := pair(t)
	t.Run("missing dst", func(t *testing.T) {
		check(t, src, filepath.Join(t.TempDir(), "nope"), Options{}, ". missing")
	})
	t.Run("missing src", func(t *testing.T) {
		if _, err := Compare(filepath.Join(t.TempDir(), "nope"), src, Options{}); err == nil {
			t.Error("no error for a missing src")
		}
	})
	t.Run("files", func(t *testing.T) {
		a, b := filepath.Join(src, "a", "b.txt"), filepath.Join(t.TempDir(), "b")
		if err := os.WriteFile(b, []byte("hello, world\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(a)
		if err := os.Chtimes(b, time.Time{}, fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		check(t, a, b, Options{})
		if err := os.WriteFile(b, []byte("hello, there\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, a, b, Options{IgnoreMtime: true}, ". content")
	})
	t.Run("file vs dir", func(t *testing.T) {
		check(t, filepath.Join(src, "x"), src, Options{}, ". type")
	})
	t.Run("unreadable dir", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads everything")
		}
		_, dst := pair(t)
		sub := filepath.Join(dst, "a", "sub")
		if err := os.Chmod(sub, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(sub, 0o755) })
		if _, err := Compare(src, dst, Options{}); err == nil {
			t.Error("no error for an unreadable directory")
		}
	})
}
