//go:build linux

package dirat

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	fd, err := Open(dfd, "f", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, _ := unix.Read(fd, buf); string(buf[:n]) != "data" {
		t.Errorf("read %q", buf[:n])
	}
	unix.Close(fd)
	// Errors as unix.Openat gives them, comparable to the errno.
	if _, err := Open(dfd, "l", unix.O_RDONLY|unix.O_NOFOLLOW, 0); err != unix.ELOOP {
		t.Errorf("a symlink with O_NOFOLLOW: %v, want ELOOP", err)
	}
	if _, err := Open(dfd, "missing", unix.O_RDONLY, 0); err != unix.ENOENT {
		t.Errorf("a missing name: %v, want ENOENT", err)
	}
	if _, err := Open(dfd, "f\x00x", unix.O_RDONLY, 0); err != unix.EINVAL {
		t.Errorf("a name with a NUL: %v, want EINVAL", err)
	}
	// A name too long for the stack, and one too long for the kernel.
	long := strings.Repeat("n", 255)
	if _, err := Open(dfd, long, unix.O_RDONLY, 0); err != unix.ENOENT {
		t.Errorf("a long missing name: %v, want ENOENT", err)
	}
	if _, err := Open(dfd, long+"n", unix.O_RDONLY, 0); err != unix.ENAMETOOLONG {
		t.Errorf("a name over 255 bytes: %v, want ENAMETOOLONG", err)
	}
	// Created with the mode asked, relative to the directory.
	fd, err = Open(dfd, "new", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if st, err := os.Stat(filepath.Join(dir, "new")); err != nil || st.Mode().Perm()&^0o600 != 0 {
		t.Errorf("created: %v, %v", st, err)
	}
}

// TestOpenAllocs: the point of the package.
func TestOpenAllocs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	name := "file"
	if a := testing.AllocsPerRun(100, func() {
		fd, err := Open(dfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		Open(dfd, "missing", unix.O_RDONLY, 0)
		var st unix.Stat_t
		if err := Lstat(dfd, name, &st); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations an open and a stat, want none", a)
	}
}

func TestLstat(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	// The same as unix.Fstatat says, for each kind of name.
	for _, name := range []string{"f", "l", "missing", "f\x00x", strings.Repeat("n", 255), strings.Repeat("n", 256)} {
		var got, want unix.Stat_t
		gerr := Lstat(dfd, name, &got)
		werr := unix.Fstatat(dfd, name, &want, unix.AT_SYMLINK_NOFOLLOW)
		if gerr != werr || got != want {
			t.Errorf("%.20q: Lstat = %v %+v, unix.Fstatat = %v %+v", name, gerr, got, werr, want)
		}
	}
	var st unix.Stat_t
	if Lstat(dfd, "l", &st); st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("a symlink followed: mode %o", st.Mode)
	}
}

// TestCalls: both ways of making the calls do the same thing and fail the
// same way: the told one (the zero Calls) and the quick one.
func TestCalls(t *testing.T) {
	for _, c := range []Calls{{}, Quick(true)} {
		t.Run(map[bool]string{false: "told", true: "quick"}[c.IsQuick()], func(t *testing.T) {
			dir := t.TempDir()
			dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(dfd)
			fd, err := c.Open(dfd, "f", unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := c.Write(fd, []byte("hello")); n != 5 || err != nil {
				t.Errorf("Write = %d, %v", n, err)
			}
			if err := c.Fchmod(fd, 0o640); err != nil {
				t.Error(err)
			}
			if err := c.Fchown(fd, os.Getuid(), os.Getgid()); err != nil {
				t.Error(err)
			}
			const mtime = 1_700_000_000_123_456_789
			if err := c.SetMtime(fd, mtime); err != nil {
				t.Error(err)
			}
			var st unix.Stat_t
			if err := c.Fstat(fd, &st); err != nil || st.Size != 5 || st.Mode&0o7777 != 0o640 || st.Mtim.Nano() != mtime {
				t.Errorf("Fstat = %v: size %d mode %o mtime %d, want 5 640 %d", err, st.Size, st.Mode&0o7777, st.Mtim.Nano(), int64(mtime))
			}
			if err := c.Close(fd); err != nil {
				t.Error(err)
			}
			if err := c.Close(fd); err != unix.EBADF {
				t.Errorf("Close twice: %v, want EBADF", err)
			}
			// Read back what was written; errors as errnos, as unix gives them.
			fd, err = c.Open(dfd, "f", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(fd)
			buf := make([]byte, 16)
			if n, err := c.Read(fd, buf); string(buf[:max(n, 0)]) != "hello" || err != nil {
				t.Errorf("Read = %q, %v", buf[:max(n, 0)], err)
			}
			if n, err := c.Read(fd, buf); n != 0 || err != nil {
				t.Errorf("Read at the end = %d, %v, want 0, nil", n, err)
			}
			if n, err := c.Write(fd, []byte("x")); n != -1 || err != unix.EBADF {
				t.Errorf("Write to a read-only descriptor = %d, %v, want -1, EBADF", n, err)
			}
			if _, err := c.Open(dfd, "missing", unix.O_RDONLY, 0); err != unix.ENOENT {
				t.Errorf("Open of a missing name: %v, want ENOENT", err)
			}
			if err := c.Lstat(dfd, "missing", &st); err != unix.ENOENT {
				t.Errorf("Lstat of a missing name: %v, want ENOENT", err)
			}
			if err := c.Fstat(-1, &st); err != unix.EBADF {
				t.Errorf("Fstat(-1): %v, want EBADF", err)
			}
			if a := testing.AllocsPerRun(50, func() {
				c.Lstat(dfd, "f", &st)
				c.Fstat(fd, &st)
				c.Read(fd, buf)
			}); a != 0 {
				t.Errorf("%v allocations, want none", a)
			}
		})
	}
}

// TestOnMemory: a memory filesystem is told from the others as the
// kernel's mount table names them, with the device that stat gives.
func TestOnMemory(t *testing.T) {
	paths := []string{t.TempDir(), "/"}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		paths = append(paths, "/dev/shm")
	}
	sawMemory := false
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		on, dev := OnMemory(fd)
		unix.Close(fd)
		typ := mountType(t, p)
		if want := typ == "tmpfs" || typ == "ramfs"; on != want {
			t.Errorf("%s (%s in /proc/self/mountinfo): OnMemory = %v, want %v", p, typ, on, want)
		}
		sawMemory = sawMemory || on
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil || st.Dev != dev {
			t.Errorf("%s: device %d, stat says %d (%v)", p, dev, st.Dev, err)
		}
	}
	if !sawMemory {
		t.Log("no memory filesystem among", paths, "(only the other answer checked)")
	}
	if on, _ := OnMemory(-1); on {
		t.Error("a bad descriptor on a memory filesystem")
	}
}

// mountType is the filesystem type of the mount holding path p, from
// /proc/self/mountinfo: the longest mount point p is under.
func mountType(t *testing.T, p string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	p, _ = filepath.EvalSymlinks(p)
	best, typ := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 0 || sep+1 >= len(f) {
			continue
		}
		mp := f[4]
		if (p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, typ = mp, f[sep+1]
		}
	}
	return typ
}

// TestCallsWhileStacksGrow: a name or a buffer on the goroutine's stack
// stays where the kernel is told it is, however deep the call and
// however small the stack it starts on (a goroutine's stack is moved when
// it grows: a pointer passed on as a uintptr would then point at the old
// one).
func TestCallsWhileStacksGrow(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "some-file-name"), []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	var want unix.Stat_t
	if err := unix.Fstatat(dfd, "some-file-name", &want, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	var deep func(c Calls, depth int) error
	deep = func(c Calls, depth int) error {
		var pad [64]byte // a frame of some size at each level
		if depth > 0 {
			return deep(c, depth-1+int(pad[0]))
		}
		var st unix.Stat_t
		if err := c.Lstat(dfd, "some-file-name", &st); err != nil || st.Ino != want.Ino {
			return fmt.Errorf("Lstat: %v, inode %d, want %d", err, st.Ino, want.Ino)
		}
		fd, err := c.Open(dfd, "some-file-name", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("Open: %v", err)
		}
		defer c.Close(fd)
		if err := c.SetMtime(fd, want.Mtim.Nano()); err != nil {
			return fmt.Errorf("SetMtime: %v", err)
		}
		return nil
	}
	for _, c := range []Calls{{}, Quick(true)} {
		for depth := 0; depth < 200; depth += 7 {
			errc := make(chan error, 1)
			go func() { errc <- deep(c, depth) }() // a new, small stack
			if err := <-errc; err != nil {
				t.Fatalf("quick %v, depth %d: %v", c.IsQuick(), depth, err)
			}
		}
	}
}
