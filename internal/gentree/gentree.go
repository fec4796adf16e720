// Package gentree generates deterministic directory trees for tests and
// benchmarks: many small files (Small), a realistic mixed tree (Mixed), the
// same layout with every file half random and half repeated text (Half) or
// all random (Random), and a few large files (Large).
//
// Everything is a function of the arguments (and the seed, for Mixed): names,
// sizes, content, permission bits and mtimes (with nanoseconds), so two runs
// produce trees that internal/treecmp finds equal. The layout is planned with a
// seeded math/rand/v2 PCG; file content comes from a wyrand generator seeded
// per file, written through a reused buffer (about 5 GB/s per core, far
// faster than tmpfs can take it): random bytes for Small and Large files,
// and for a Mixed tree's media and blobs; its text, logs, records and code
// are made from a Zipf-weighted vocabulary and compress as such files do
// (text.go).
// Files are written by GOMAXPROCS workers; per-file seeds keep the result
// independent of scheduling.
//
// Permission bits are set explicitly (the umask does not matter) and
// directory modes and mtimes are applied last, deepest first, so that a
// read-only directory can be filled and no later write disturbs a
// directory's mtime. Owners are left as created.
package gentree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/unixmode"
)

// Epoch is the reference time of generated mtimes: Small and Large files are
// stamped from it onwards, Mixed ones in the five years before it.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// bufSize is the size of each worker's content buffer.
const bufSize = 256 << 10

// contentSource fills buffers with cheap pseudo-random bytes (wyrand).
type contentSource struct{ s uint64 }

func newContent(seed uint64) *contentSource {
	return &contentSource{s: seed ^ 0x2d358dccaa6c78a5}
}

// wyrand advances the state *x and returns its next 64 bits.
func wyrand(x *uint64) uint64 {
	*x += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(*x, *x^0xe7037ed1a0b428db)
	return hi ^ lo
}

func (c *contentSource) fill(b []byte) {
	x := c.s
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, wyrand(&x))
		b = b[8:]
	}
	if len(b) > 0 {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], wyrand(&x))
		copy(b, tail[:])
	}
	c.s = x
}

// fileSpec is one regular file to write.
type fileSpec struct {
	path  string // absolute or relative to the process, OS-separated
	size  int64
	perm  fs.FileMode
	mtime time.Time
	seed  uint64
	kind  int // content: contentRandom (the zero value), contentProse, ...
}

// writeFile creates spec.path exclusively and fills it with spec.size bytes
// of content seeded by spec.seed. It uses raw system calls: an *os.File costs
// five more per file (non-blocking setup and poller registration), which is
// most of the time of a tree of small files.
func writeFile(spec *fileSpec, buf []byte) error {
	perm := uint32(spec.perm.Perm())
	fd, err := unix.Open(spec.path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, perm)
	if err != nil {
		return &fs.PathError{Op: "open", Path: spec.path, Err: err}
	}
	fail := func(op string, err error) error {
		unix.Close(fd)
		return &fs.PathError{Op: op, Path: spec.path, Err: err}
	}
	src := newFiller(spec.kind, spec.seed, spec.size)
	for left := spec.size; left > 0; {
		n := int(min(left, int64(len(buf))))
		src.fill(buf[:n])
		for b := buf[:n]; len(b) > 0; {
			w, err := unix.Write(fd, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return fail("write", err)
			}
			b = b[w:]
		}
		left -= int64(n)
	}
	if mask := umask(); mask < 0 || perm&uint32(mask) != 0 || spec.perm&^fs.ModePerm != 0 {
		if err := unix.Fchmod(fd, unixmode.Of(spec.perm)); err != nil {
			return fail("chmod", err)
		}
	}
	if err := unix.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: spec.path, Err: err}
	}
	ts := unix.NsecToTimespec(spec.mtime.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, spec.path, []unix.Timespec{ts, ts}, 0); err != nil {
		return &fs.PathError{Op: "utimensat", Path: spec.path, Err: err}
	}
	return nil
}

// umask returns the process's umask as /proc/self/status reports it, or -1
// when it cannot be read (then every file gets an explicit chmod). Reading it
// this way does not change it, unlike umask(2).
var umask = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return -1
			}
			return int(m)
		}
	}
	return -1
})

// block is how many consecutive files a worker takes at a time: consecutive
// files tend to share a directory, and creates in one directory serialise on
// its lock, so workers should mostly be in different directories.
const block = 64

// writeAll writes the files produced by next (called with 0, 1, ... up to
// count-1) with GOMAXPROCS workers, and returns the first error.
func writeAll(count int, next func(i int, spec *fileSpec)) error {
	workers := min(runtime.GOMAXPROCS(0), max(count, 1))
	var (
		mu    sync.Mutex
		i     int
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, bufSize)
			var spec fileSpec
			for {
				mu.Lock()
				if i >= count || first != nil {
					mu.Unlock()
					return
				}
				lo := i
				i = min(i+block, count)
				hi := i
				mu.Unlock()
				for k := lo; k < hi; k++ {
					next(k, &spec)
					if err := writeFile(&spec, buf); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// setMeta sets a directory's (or any name's) permission bits and mtime.
func setMeta(path string, perm fs.FileMode, mtime time.Time) error {
	if err := os.Chmod(path, perm); err != nil {
		return err
	}
	return os.Chtimes(path, mtime, mtime)
}

// lchtimes sets the mtime (and atime) of path without following a symlink.
func lchtimes(path string, mtime time.Time) error {
	ts := unix.NsecToTimespec(mtime.UnixNano())
	err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return &fs.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}

// digits returns the number of decimal digits needed for values below n,
// at least min.
func digits(n, least int) int {
	d := len(fmt.Sprint(max(n-1, 0)))
	return max(d, least)
}

// Small writes files files of size bytes each under dir, spread evenly over
// dirs subdirectories named d0000, d0001, ... (all in dir itself when dirs is
// 0). Files are named f000000, f000001, ... by a global index, mode 0644;
// subdirectories and dir itself get mode 0755. dir is created if missing;
// the names must not exist yet. Example: Small(dir, 100_000, 1_000, 1024).
func Small(dir string, files, dirs, size int) error {
	if files < 0 || dirs < 0 || size < 0 {
		return errors.New("gentree: negative count or size")
	}
	if dirs > files && files > 0 {
		dirs = files
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dw, fw := digits(dirs, 4), digits(files, 6)
	dirName := func(d int) string { return filepath.Join(dir, fmt.Sprintf("d%0*d", dw, d)) }
	for d := range dirs {
		if err := os.Mkdir(dirName(d), 0o700); err != nil {
			return err
		}
	}
	err := writeAll(files, func(i int, spec *fileSpec) {
		d := dir
		if k := dirOfEven(i, files, dirs); k >= 0 {
			d = dirName(k)
		}
		*spec = fileSpec{
			path:  filepath.Join(d, fmt.Sprintf("f%0*d", fw, i)),
			size:  int64(size),
			perm:  0o644,
			mtime: Epoch.Add(time.Duration(i)*time.Second + time.Duration(mix64(uint64(i))%1e9)),
			seed:  uint64(i) + 1,
		}
	})
	if err != nil {
		return err
	}
	for d := range dirs {
		if err := setMeta(dirName(d), 0o755, Epoch.Add(time.Duration(d)*time.Minute+123456789)); err != nil {
			return err
		}
	}
	return setMeta(dir, 0o755, Epoch.Add(-time.Hour+987654321))
}

// dirOfEven returns the subdirectory of file i when files are spread evenly
// over dirs directories (-1 for none): directory d holds the files
// [d*files/dirs, (d+1)*files/dirs).
func dirOfEven(i, files, dirs int) int {
	if dirs == 0 {
		return -1
	}
	// The largest d with d*files/dirs <= i.
	return int(((int64(i)+1)*int64(dirs) - 1) / int64(files))
}

// mix64 is the splitmix64 finaliser: a cheap hash of an index.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Large writes count files of size bytes each into dir, named large-000.bin,
// large-001.bin, ..., mode 0644, with incompressible content. dir is created
// if missing (mode 0755) and its mtime set last.
func Large(dir string, count int, size int64) error {
	if count < 0 || size < 0 {
		return errors.New("gentree: negative count or size")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w := digits(count, 3)
	err := writeAll(count, func(i int, spec *fileSpec) {
		*spec = fileSpec{
			path:  filepath.Join(dir, fmt.Sprintf("large-%0*d.bin", w, i)),
			size:  size,
			perm:  0o644,
			mtime: Epoch.Add(time.Duration(i)*time.Hour + time.Duration(mix64(uint64(i)+1<<40)%1e9)),
			seed:  uint64(i) + 1<<40,
		}
	})
	if err != nil {
		return err
	}
	return setMeta(dir, 0o755, Epoch.Add(-2*time.Hour+135792468))
}
