//go:build linux

// Command floor makes the file system calls that copying a tree of small
// files cannot do without, and nothing else: no network, no archive
// format, no second thread. bench/cpu.sh runs it as the floor of its
// small-file rows: the least CPU the two ends' file work takes on this
// machine, against which a copy's CPU-seconds are read.
//
//	floor -read SRC           # each regular file: lstat, open, read, fstat, close
//	floor -copy SRC -to DST   # the same, and each one made in DST: open (create),
//	                          # write, set its mtime, close (directories made first)
//	floor -hash SRC           # each regular file read whole and hashed in the block
//	                          # delta's blocks (XXH3-128): one end's share of a delta
//
// The calls go straight to the kernel (RawSyscall), one file after the
// other on one locked thread, as a C program would make them. The
// directories are listed first and not counted: what is timed is the
// files' calls. The summary line (files, bytes, CPU-seconds of this
// process, user and system) goes to stderr.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/wire"
)

type file struct {
	dir  int // index into dirs
	name []byte
}

func main() {
	src := flag.String("read", "", "the tree to read")
	cp := flag.String("copy", "", "the tree to read and copy (with -to)")
	to := flag.String("to", "", "where -copy makes the copy (a new directory)")
	hash := flag.String("hash", "", "the tree to read and hash in the block delta's blocks")
	flag.Parse()
	if *hash != "" && *src == "" && *cp == "" && flag.NArg() == 0 {
		hashTree(*hash)
		return
	}
	root, write := *src, false
	if *cp != "" {
		root, write = *cp, true
	}
	if root == "" || write == (*to == "") || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: floor -read SRC | floor -copy SRC -to DST | floor -hash SRC")
		os.Exit(2)
	}
	runtime.LockOSThread()
	var dirs []string
	var files []file
	if err := list(root, ".", &dirs, &files); err != nil {
		fail(err)
	}
	srcfds := make([]int, len(dirs))
	dstfds := make([]int, len(dirs))
	for i, d := range dirs {
		fd, err := unix.Open(filepath.Join(root, d), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			fail(err)
		}
		srcfds[i] = fd
		if write {
			p := filepath.Join(*to, d)
			if err := os.MkdirAll(p, 0o755); err != nil {
				fail(err)
			}
			if dstfds[i], err = unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				fail(err)
			}
		}
	}
	buf := make([]byte, 256<<10)
	var st unix.Stat_t
	var total int64
	var r0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	for _, f := range files {
		name := unsafe.Pointer(&f.name[0])
		if _, _, e := unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(srcfds[f.dir]), uintptr(name), uintptr(unsafe.Pointer(&st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0); e != 0 {
			fail(e)
		}
		fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(srcfds[f.dir]), uintptr(name), unix.O_RDONLY|unix.O_NOATIME|unix.O_CLOEXEC, 0, 0, 0)
		if e != 0 {
			fail(e)
		}
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		if e != 0 {
			fail(e)
		}
		total += int64(n)
		unix.RawSyscall(unix.SYS_FSTAT, fd, uintptr(unsafe.Pointer(&st)), 0)
		unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
		if !write {
			continue
		}
		out, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dstfds[f.dir]), uintptr(name), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644, 0, 0)
		if e != 0 {
			fail(e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_WRITE, out, uintptr(unsafe.Pointer(&buf[0])), n); e != 0 {
			fail(e)
		}
		ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, st.Mtim}
		unix.RawSyscall6(unix.SYS_UTIMENSAT, out, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		unix.RawSyscall(unix.SYS_CLOSE, out, 0, 0)
	}
	summary(len(files), total, r0)
}

// summary prints the files, bytes and this process's CPU-seconds since r0.
func summary(files int, total int64, r0 unix.Rusage) {
	var r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	user := time.Duration(r1.Utime.Nano() - r0.Utime.Nano())
	sys := time.Duration(r1.Stime.Nano() - r0.Stime.Nano())
	fmt.Fprintf(os.Stderr, "floor: %d files, %d bytes: %.2f CPU-s (user %.2f, system %.2f)\n",
		files, total, (user + sys).Seconds(), user.Seconds(), sys.Seconds())
}

// hashTree reads each regular file under root whole, one after the other,
// and hashes it block by block as the block delta does at each end (its
// block size for the file's size, XXH3-128 a block): what finding the
// changed blocks of a file cannot do without, at one end.
func hashTree(root string) {
	runtime.LockOSThread()
	var dirs []string
	var files []file
	if err := list(root, ".", &dirs, &files); err != nil {
		fail(err)
	}
	var r0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	var total int64
	var buf []byte
	for _, f := range files {
		p := filepath.Join(root, dirs[f.dir], string(f.name[:len(f.name)-1]))
		fd, err := os.Open(p)
		if err != nil {
			fail(err)
		}
		fi, err := fd.Stat()
		if err != nil {
			fail(err)
		}
		// Read as the delta reads (wire.ReadChunk at a time), hashed in
		// its blocks.
		bs := wire.BlockSize(fi.Size())
		chunk := int64(wire.ChunkBlocks(bs)) * bs
		if int64(len(buf)) < chunk {
			buf = make([]byte, chunk)
		}
		for {
			n, err := io.ReadFull(fd, buf[:chunk])
			for o := 0; o < n; o += int(bs) {
				_ = wire.BlockHash(buf[o:min(o+int(bs), n)])
			}
			total += int64(n)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				fail(err)
			}
		}
		fd.Close()
	}
	summary(len(files), total, r0)
}

// list appends the directories under root/rel (rel included) to dirs and
// their regular files to files (each read with one read of up to 256 KiB:
// the small-file trees' files fit).
func list(root, rel string, dirs *[]string, files *[]file) error {
	d := len(*dirs)
	*dirs = append(*dirs, rel)
	ents, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			*files = append(*files, file{dir: d, name: append([]byte(e.Name()), 0)})
		}
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := list(root, filepath.Join(rel, e.Name()), dirs, files); err != nil {
				return err
			}
		}
	}
	return nil
}

func fail(err error) {
	if e, ok := err.(syscall.Errno); ok {
		err = fmt.Errorf("%v", e.Error())
	}
	fmt.Fprintln(os.Stderr, "floor:", err)
	os.Exit(1)
}
