package dirat

import (
	"os"
	"path/filepath"
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
