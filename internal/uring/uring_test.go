//go:build linux

package uring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func newRing(t *testing.T, entries int) *Ring {
	t.Helper()
	r, err := New(entries)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

const flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK

// TestLoad reads more files than one group holds, of several sizes, with
// the failures a reader meets (a name gone, a symlink, a FIFO, a directory
// that did not open), and leaves no descriptor open.
func TestLoad(t *testing.T) {
	r := newRing(t, 8) // 8 files a group: Load takes two
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	var files []File
	want := map[string][]byte{}
	for i, size := range []int{0, 1, 511, 4096, 32 << 10, 7, 100, 3000, 1, 2, 65536, 9} {
		name := fmt.Sprintf("f%02d", i)
		data := bytes.Repeat([]byte{byte('a' + i)}, size)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = data
		files = append(files, File{Dir: dfd, Name: name, Flags: flags, Size: int64(size), Buf: make([]byte, size)})
	}
	if err := os.Symlink("f01", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	files = append(files,
		File{Dir: dfd, Name: "gone", Flags: flags, Size: 10, Buf: make([]byte, 10)},
		File{Dir: dfd, Name: "link", Flags: flags, Size: 1, Buf: make([]byte, 1)},
		File{Dir: dfd, Name: "fifo", Flags: flags, Size: 5, Buf: make([]byte, 5)},
		File{Dir: -1, Name: "f01", Flags: flags, Size: 1, Buf: make([]byte, 1)},
	)
	before := openFDs(t)
	if err := r.Load(files); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after Load, %d before", after, before)
	}
	for _, f := range files {
		data, ok := want[f.Name]
		if !ok || f.Dir == -1 {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, f.Name), &st); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Err != nil:
			t.Errorf("%s: %s: %v", f.Name, f.Op, f.Err)
		case f.N != len(data) || !bytes.Equal(f.Buf[:f.N], data):
			t.Errorf("%s: read %d bytes, want %d as written", f.Name, f.N, len(data))
		case f.Stat != (Stat{Mode: st.Mode, Size: st.Size, Mtime: st.Mtim.Nano(), Ino: st.Ino}):
			t.Errorf("%s: stat %+v, lstat says mode %o size %d mtime %d ino %d", f.Name, f.Stat, st.Mode, st.Size, st.Mtim.Nano(), st.Ino)
		}
	}
	byName := map[string]File{}
	for _, f := range files {
		byName[f.Name] = f
	}
	if f := byName["gone"]; f.Op != "open" || !errors.Is(f.Err, unix.ENOENT) {
		t.Errorf("a missing name: %s %v, want open ENOENT", f.Op, f.Err)
	}
	if f := byName["link"]; f.Op != "open" || !errors.Is(f.Err, unix.ELOOP) {
		t.Errorf("a symlink: %s %v, want open ELOOP (not followed)", f.Op, f.Err)
	}
	if f := byName["fifo"]; f.Err == nil && (f.N != 0 || f.Stat.Mode&unix.S_IFMT != unix.S_IFIFO) {
		t.Errorf("a FIFO: read %d bytes, mode %o: want nothing read and a FIFO's mode", f.N, f.Stat.Mode)
	}
	for _, f := range files {
		if f.Dir == -1 && (f.Op != "open" || !errors.Is(f.Err, unix.EBADF)) {
			t.Errorf("no directory: %s %v, want open EBADF", f.Op, f.Err)
		}
	}
}

// TestLoadShrunk: a file shorter than announced reads short, with no
// error; the caller compares N and Stat with what it expected.
func TestLoadShrunk(t *testing.T) {
	r := newRing(t, 8)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []File{{Dir: unix.AT_FDCWD, Name: filepath.Join(dir, "f"), Flags: flags, Size: 10, Buf: make([]byte, 10)}}
	before := openFDs(t)
	if err := r.Load(files); err != nil {
		t.Fatal(err)
	}
	if f := files[0]; f.Err != nil || f.N != 3 || f.Stat.Size != 3 || string(f.Buf[:3]) != "abc" {
		t.Errorf("got %d bytes %q, stat size %d, err %v; want the 3 bytes there are", f.N, f.Buf[:f.N], f.Stat.Size, f.Err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after Load, %d before", after, before)
	}
}

func TestLoadAllocs(t *testing.T) {
	r := newRing(t, 128)
	dir := t.TempDir()
	var files []File
	for i := range 40 {
		name := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(name, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Dir: unix.AT_FDCWD, Name: name, Flags: flags, Size: 100, Buf: make([]byte, 100)})
	}
	if a := testing.AllocsPerRun(10, func() {
		if err := r.Load(files); err != nil {
			t.Fatal(err)
		}
	}); a > 0 {
		t.Errorf("Load of %d files: %.1f allocations, want none", len(files), a)
	}
}

// TestCreateThenLoad: one ring serves both kinds of call, a Load's group
// after a larger Create (the ring's scratch space grows for each), and
// reads back what it wrote.
func TestCreateThenLoad(t *testing.T) {
	r := newRing(t, 128)
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	var created []NewFile
	for i := range 100 {
		name := fmt.Sprintf("a-rather-long-name-%03d", i)
		created = append(created, NewFile{Dir: dfd, Name: name, Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC, Perm: 0o644, Data: []byte(name)})
	}
	if err := r.Create(created); err != nil {
		t.Fatal(err)
	}
	var files []File
	for _, f := range created {
		if f.Err != nil || f.N != len(f.Name) {
			t.Fatalf("create %s: wrote %d, %v", f.Name, f.N, f.Err)
		}
		unix.Close(f.Fd)
		if len(files) < 40 {
			files = append(files, File{Dir: dfd, Name: f.Name, Flags: flags, Size: int64(len(f.Name)), Buf: make([]byte, len(f.Name))})
		}
	}
	if err := r.Load(files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Err != nil || string(f.Buf[:f.N]) != f.Name || f.Stat.Size != int64(len(f.Name)) || f.Stat.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Errorf("%s: %q, %+v, %v", f.Name, f.Buf[:f.N], f.Stat, f.Err)
		}
	}
}

// TestCreate creates and writes files through the ring, a group in two
// calls: a name already taken (a symlink, not followed; a file, left as
// it is) fails its own open with EEXIST, the others hold their data.
func TestCreate(t *testing.T) {
	r := newRing(t, 8)
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("keep"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.WriteFile(filepath.Join(dir, "taken"), []byte("theirs"), 0o600)
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	fds := openFDs(t)
	const cflags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	var files []NewFile
	for i := range 12 { // more than the ring's entries: two groups
		name := fmt.Sprintf("f%d", i)
		switch i {
		case 3:
			name = "link"
		case 9:
			name = "taken"
		}
		files = append(files, NewFile{Dir: d, Name: name, Flags: cflags, Perm: 0o640, Data: bytes.Repeat([]byte{byte('a' + i)}, 100*i)})
	}
	if err := r.Create(files); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if i == 3 || i == 9 {
			if f.Fd >= 0 || !errors.Is(f.Err, unix.EEXIST) || f.Op != "open" {
				t.Errorf("%s: fd %d, %v (%s); want EEXIST on open", f.Name, f.Fd, f.Err, f.Op)
			}
			continue
		}
		if f.Fd < 0 || f.Err != nil || f.N != len(f.Data) {
			t.Errorf("%s: fd %d, %v (%s), wrote %d of %d", f.Name, f.Fd, f.Err, f.Op, f.N, len(f.Data))
			continue
		}
		unix.Close(f.Fd)
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		st, _ := os.Stat(filepath.Join(dir, f.Name))
		if err != nil || !bytes.Equal(got, f.Data) || st.Mode().Perm() != 0o640&^umask() {
			t.Errorf("%s: %d bytes, %v, mode %v", f.Name, len(got), err, st.Mode())
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != "keep" {
		t.Errorf("written through the symlink: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "taken")); string(got) != "theirs" {
		t.Errorf("the taken name: %q", got)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open, %d before", n, fds)
	}
}

func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}
