package sharder

import (
	"bytes"
	"encoding/binary"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/model"
)

// rawStat is what the walk needs from lstat.
type rawStat struct {
	typ   fs.FileMode // type bits only: 0 (regular), ModeDir, ModeSymlink, ...
	perm  fs.FileMode // permission bits plus ModeSetuid, ModeSetgid, ModeSticky
	nlink uint64
	uid   uint32
	gid   uint32
	size  int64
	mtime int64 // Unix nanoseconds
	ctime int64 // Unix nanoseconds
	dev   uint64
	ino   uint64
	rdev  uint64 // a device's number, as model.Mkdev puts it
	// blocks is the space allocated, in 512-byte units: less than the
	// size, the file has holes.
	blocks int64
}

// sparse reports whether the file has holes (allocates less than its size).
func (r *rawStat) sparse() bool { return r.blocks*512 < r.size }

func fromUnix(st *unix.Stat_t) rawStat {
	return fromMode(st.Mode, rawStat{
		nlink: uint64(st.Nlink),
		uid:   st.Uid,
		gid:   st.Gid,
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		dev:   uint64(st.Dev),
		ino:   uint64(st.Ino),
		rdev:  model.Mkdev(unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))),

		blocks: st.Blocks,
	})
}

// fromMode completes r with the type and permission bits of mode (st_mode).
func fromMode(mode uint32, r rawStat) rawStat {
	r.perm, r.typ = unixmode.FileMode(mode), unixmode.Type(mode)
	return r
}

// lstatPath lstats a path (the source root).
func lstatPath(name string) (rawStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Lstat(name, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return rawStat{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return fromUnix(&st), nil
	}
}

// dirHandle gives fast access to the names of one open directory: on Linux
// fstatat and readlinkat relative to the directory's descriptor, which saves
// the kernel a path walk per entry.
type dirHandle struct {
	fd   int
	path string // the directory's path, for error messages
}

// withDir calls fn with a handle on the open directory f, whose path is dir.
func withDir(f *os.File, dir string, fn func(d dirHandle)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(dirHandle{fd: int(fd), path: dir}) })
}

func (d dirHandle) lstat(name string) (rawStat, error) {
	var st unix.Stat_t
	for {
		err := dirat.Lstat(d.fd, name, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return rawStat{}, &fs.PathError{Op: "lstat", Path: joinPath(d.path, name), Err: err}
		}
		return fromUnix(&st), nil
	}
}

// stat is lstat through a symlink (-L): what it points to. It fails
// with errNoReferent where that is nothing.
func (d dirHandle) stat(name string) (rawStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return rawStat{}, noReferent(joinPath(d.path, name), err)
		}
		return fromUnix(&st), nil
	}
}

// readlink returns the target of the symlink name; sizeHint is its lstat size.
func (d dirHandle) readlink(name string, sizeHint int64) (string, error) {
	n := int(sizeHint) + 1
	if n < 128 {
		n = 128
	}
	for {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(d.fd, name, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: joinPath(d.path, name), Err: err}
		}
		if m < n {
			return string(buf[:m]), nil
		}
		n *= 2 // the link grew since lstat, or the filesystem lies about its size
	}
}

// openDir opens the directory at name without following a symlink in its
// last component (the walk never follows symlinks, even one that replaced a
// directory after it was listed).
//
// By open(2) and os.NewFile, not os.OpenFile: os.OpenFile offers the
// descriptor to the runtime's poller, which refuses a directory only after
// an epoll_ctl and four fcntl calls, a tenth of the system calls of a
// directory of ten small files; the walk reads it by getdents64 anyway.
func openDir(name string, follow bool) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	for {
		fd, err := unix.Open(name, flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// openUnder opens the directory rel (slash-separated, not ".") under the
// open directory root, whose path is rootPath, one component at a time
// without following a symlink in any of them.
func openUnder(root *os.File, rootPath, rel string) (*os.File, error) {
	rc, err := root.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var oerr error
	cerr := rc.Control(func(rfd uintptr) {
		cur := int(rfd)
		for comp := range strings.SplitSeq(rel, "/") {
			var nfd int
			for {
				nfd, oerr = unix.Openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if oerr != unix.EINTR {
					break
				}
			}
			if cur != int(rfd) {
				unix.Close(cur)
			}
			if oerr != nil {
				return
			}
			cur = nfd
		}
		fd = cur
	})
	full := joinPath(rootPath, filepath.FromSlash(rel))
	if cerr != nil {
		return nil, &fs.PathError{Op: "open", Path: full, Err: cerr}
	}
	if oerr != nil {
		return nil, &fs.PathError{Op: "open", Path: full, Err: oerr}
	}
	return os.NewFile(uintptr(fd), full), nil
}

// dirReader reads a directory's names with getdents64 into a buffer of
// its own, as (*os.File).ReadDir does, but without a DirEntry and a string
// for each name: the walk makes one string of each name it keeps, its
// path under SRC.
type dirReader struct {
	*dirScratch
	bufp, nbuf int
	eof        bool // getdents said the end: no need to ask again
}

// dirScratch is a dirReader's memory, reused from directory to directory:
// getdents' buffer, and the entries of a read with their names (buf is
// refilled before a read has its n names), ends where each name ends.
type dirScratch struct {
	buf   []byte
	ents  []dirent
	names []byte
	ends  []int
}

var dirScratches = sync.Pool{New: func() any { return &dirScratch{buf: make([]byte, 8<<10)} }}

// read returns up to n names of the directory f (not "." and ".."),
// valid until the next read; io.EOF once there are none left, as
// (*os.File).ReadDir(n) does.
func (r *dirReader) read(f *os.File, n int) ([]dirent, error) {
	if r.dirScratch == nil {
		r.dirScratch = dirScratches.Get().(*dirScratch)
	}
	r.ents, r.names, r.ends = r.ents[:0], r.names[:0], r.ends[:0]
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, &fs.PathError{Op: "readdirent", Path: f.Name(), Err: err}
	}
	var rerr error
	cerr := rc.Control(func(fd uintptr) { rerr = r.fill(int(fd), f.Name(), n) })
	if cerr != nil {
		rerr = &fs.PathError{Op: "readdirent", Path: f.Name(), Err: cerr}
	}
	start := 0
	for k, end := range r.ends {
		r.ents[k].name = r.names[start:end:end]
		start = end
	}
	if rerr == nil && len(r.ents) == 0 {
		rerr = io.EOF
	}
	return r.ents, rerr
}

// fill appends up to n names of the directory fd (named path) to r.ents.
func (r *dirReader) fill(fd int, path string, n int) error {
	for len(r.ends) < n {
		if r.bufp >= r.nbuf {
			if r.eof {
				return nil
			}
			r.bufp = 0
			m, err := unix.Getdents(fd, r.buf)
			for err == unix.EINTR {
				m, err = unix.Getdents(fd, r.buf)
			}
			if err != nil {
				r.nbuf = 0
				return &fs.PathError{Op: "readdirent", Path: path, Err: err}
			}
			if r.nbuf = m; m <= 0 {
				r.eof = true
				return nil
			}
		}
		// struct linux_dirent64: ino, off, reclen, type, name (NUL-ended).
		rec := r.buf[r.bufp:r.nbuf]
		const nameOff = 19
		if len(rec) < nameOff {
			r.bufp = r.nbuf
			return nil
		}
		reclen := int(binary.NativeEndian.Uint16(rec[16:18]))
		if reclen < nameOff || reclen > len(rec) {
			r.bufp = r.nbuf
			return nil
		}
		rec = rec[:reclen]
		r.bufp += reclen
		name := rec[nameOff:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		var dir bool
		switch rec[18] {
		case unix.DT_DIR:
			dir = true
		case unix.DT_UNKNOWN:
			// A filesystem that does not say (as os.ReadDir, by lstat).
			var st unix.Stat_t
			if err := dirat.Lstat(fd, string(name), &st); err == unix.ENOENT {
				continue // gone since: as if it never was
			} else if err != nil {
				return &fs.PathError{Op: "lstat", Path: joinPath(path, string(name)), Err: err}
			}
			dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		r.names = append(r.names, name...)
		r.ends = append(r.ends, len(r.names))
		r.ents = append(r.ents, dirent{dir: dir})
	}
	return nil
}

// close gives back the memory.
func (r *dirReader) close() {
	if r.dirScratch != nil {
		clear(r.ents) // (no names held while pooled)
		dirScratches.Put(r.dirScratch)
		r.dirScratch = nil
	}
}
