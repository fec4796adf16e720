package extract

// Verify: comparing entries with what the destination holds, writing
// nothing (bulkmove verify).

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sys/unix"
)

// Verify compares entries with what the destination holds, writing
// nothing: type, size, mtime (files, symlinks are not compared by mtime,
// directories, devices and special files are), permission bits, owner
// (when the receiver keeps owners), symlink targets, device numbers, hard
// links (the same inode as their target) and, where sums are given, file
// content. It returns one wire.EntryError (code wire.CodeDiffer) per
// entry that differs, naming every difference. Up to hashWorkers entries
// are examined at once.
func (r *Receiver) Verify(entries []model.Entry, sums []wire.Sum) []wire.EntryError {
	var mu sync.Mutex
	var out []wire.EntryError
	r.examine(entries, sums, func(i, dfd int, base string, sum wire.Sum, buf []byte) {
		if msg := r.verifyOne(&entries[i], dfd, base, sum, buf); msg != "" {
			mu.Lock()
			out = append(out, wire.EntryError{Index: i, Code: wire.CodeDiffer, Msg: msg})
			mu.Unlock()
		}
	})
	return out
}

// examine calls fn for each entry, up to hashWorkers at once, with the
// entry's directory at the destination open as dfd (-1 if it is not
// there, or the name is bad), its base name there, its sum if given, and
// a buffer to hash with. It writes nothing.
func (r *Receiver) examine(entries []model.Entry, sums []wire.Sum, fn func(i, dfd int, base string, sum wire.Sum, buf []byte)) {
	// Each directory of the batch is opened once (see openDir), and
	// its entries examined relative to it: a path walk per directory, not
	// per file and per operation.
	dirs := map[string]int{}
	defer func() {
		for _, fd := range dirs {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	dirOf := func(p string) (int, string) {
		if p == "." {
			p = "./."
		}
		d, base := splitDir(p)
		fd, ok := dirs[d]
		if !ok {
			fd = -1
			if f, err := r.openDir(d, 0); err == nil {
				fd, _ = unix.Dup(int(f.Fd()))
				f.Close()
			}
			dirs[d] = fd
		}
		return fd, base
	}
	type job struct {
		i, dfd int
		base   string
	}
	var (
		wg   sync.WaitGroup
		jobs = make(chan job)
	)
	for range hashWorkers {
		wg.Go(func() {
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for j := range jobs {
				var sum wire.Sum
				if j.i < len(sums) {
					sum = sums[j.i]
				}
				fn(j.i, j.dfd, j.base, sum, *bp)
			}
		})
	}
	for i := range entries {
		j := job{i: i, dfd: -1}
		if !r.missing && CheckName(entries[i].Path, entries[i].Kind) == nil {
			j.dfd, j.base = dirOf(entries[i].Path)
		}
		jobs <- j
	}
	close(jobs)
	wg.Wait()
}

var kindNames = map[uint32]string{
	unix.S_IFREG: "file", unix.S_IFDIR: "directory", unix.S_IFLNK: "symlink",
	unix.S_IFIFO: "fifo", unix.S_IFSOCK: "socket", unix.S_IFCHR: "character device", unix.S_IFBLK: "block device",
}

// verifyOne returns what differs between e and the destination ("" if
// nothing), as "what: source X, destination Y" clauses joined by "; ".
func (r *Receiver) verifyOne(e *model.Entry, dfd int, base string, sum wire.Sum, buf []byte) string {
	if err := CheckName(e.Path, e.Kind); err != nil {
		return fmt.Sprintf("name: %v", err)
	}
	if dfd < 0 {
		return "missing" // its directory is not there (or not a directory)
	}
	var st unix.Stat_t
	if err := r.lstatAt(dfd, base, &st); err != nil {
		if err == unix.ENOENT {
			return "missing"
		}
		return fmt.Sprintf("cannot examine: %v", err)
	}
	want := nodeType(e.Kind)
	if got := uint32(st.Mode) & unix.S_IFMT; got != want {
		return fmt.Sprintf("type: source %s, destination %s", kindNames[want], kindNames[got])
	}
	var diffs []string
	add := func(format string, a ...any) { diffs = append(diffs, fmt.Sprintf(format, a...)) }
	switch e.Kind {
	case model.KindSymlink:
		switch got, err := r.readlinkAt(dfd, base); {
		case err != nil:
			add("link target: cannot read: %v", err)
		case got != e.Link:
			add("link target: source %q, destination %q", e.Link, got)
		}
		return strings.Join(diffs, "; ")
	case model.KindHardlink:
		if tst, err := r.lstat(e.Link); err != nil || tst.Ino != st.Ino || tst.Dev != st.Dev {
			add("hard link: not linked to %s", e.Link)
		}
		return strings.Join(diffs, "; ")
	}
	if e.Kind.IsDevice() && rdevOf(&st) != e.Rdev {
		add("device number: source %d:%d, destination %d:%d", e.Major(), e.Minor(), unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	}
	if e.Kind == model.KindFile && st.Size != e.Size {
		add("size: source %d, destination %d", e.Size, st.Size)
	}
	if st.Mtim.Nano() != e.MTime {
		add("mtime: source %s, destination %s", stamp(e.MTime), stamp(st.Mtim.Nano()))
	}
	if wantMode := r.opt.mode(e.Mode); uint32(st.Mode)&0o7777 != wantMode {
		add("mode: source %04o, destination %04o", wantMode, st.Mode&0o7777)
	}
	if r.opt.Owner && (canChown || r.opt.FakeSuper) && (st.Uid != e.UID || st.Gid != e.GID) {
		add("owner: source %d:%d, destination %d:%d", e.UID, e.GID, st.Uid, st.Gid)
	}
	if e.Kind == model.KindFile && st.Size == e.Size && sum != (wire.Sum{}) {
		switch got, err := sumAt(dfd, base, buf); {
		case err != nil:
			add("content: cannot read: %v", err)
		case got != sum:
			add("content: differs (XXH3-128)")
		}
	}
	return strings.Join(diffs, "; ")
}

// sumAt is the content hash of the file base in the directory dfd.
func sumAt(dfd int, base string, buf []byte) (wire.Sum, error) {
	fd, err := unix.Openat(dfd, base, readFlags, 0)
	if err != nil {
		return wire.Sum{}, err
	}
	defer unix.Close(fd)
	got, _, err := wire.HashReader(fdReader(fd), buf)
	return got, err
}

// lstat stats p under the root without following a symlink (see openDir).
func (r *Receiver) lstat(p string) (*unix.Stat_t, error) {
	d, base := splitDir(p)
	f, err := r.openDir(d, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(f.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &st, nil
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
