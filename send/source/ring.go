package source

import (
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/uring"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
)

// Ring reads: on a fast source filesystem, a batch's small files are
// opened, read, checked and closed through io_uring (internal/uring), a
// group of ringGroup files in three system calls and an fstat each, where
// one by one they cost four each (open, read, fstat, close). On this machine's kind of virtual
// machine a system call's entry and exit cost more than a small file's
// own work. Only the plain case goes so: a file the ring could not open
// and read whole, or that does not match the walk (changed, or no longer a
// regular file), is opened and read again the usual way, which says why.

// ringGroup is how many files one Load reads.
const ringGroup = uring.Entries / 4

// ringMax is the largest file read through the ring.
const ringMax = 32 << 10

// ringDirsMax is how many directories a batch's ring keeps open.
const ringDirsMax = 64

// ringAhead reads one batch's small files ahead of the writer, a group at
// a time, as the writer comes to them.
type ringAhead struct {
	s       Source
	entries []model.Entry
	idx     []int // the entries read through the ring, in order
	next    int   // the writer's position in idx
	ring    *uring.Ring
	group   []uring.File // the group read last: idx[start:start+len(group)]
	start   int
	arena   []byte
	dirs    map[string]int
	ctr     *metrics.Stream
	file    File // what take returns, reused file after file
	broken  bool // the ring failed: the rest go the usual way
}

// startRing returns the ring reads of a batch, or nil where they do not
// apply: a slow filesystem (read ahead by a pool instead), a paced source,
// a single-file SRC, attributes or ACLs to read from each descriptor, or
// no io_uring here.
func (s Source) startRing(entries []model.Entry, need []bool, ctr *metrics.Stream) *ringAhead {
	if s.IO.Width() > 1 || s.IO.Slow() || s.Limit.Rate() > 0 || s.File != "" || s.Xattrs || s.ACLs || s.openHook != nil {
		return nil
	}
	var idx []int
	for i := range entries {
		e := &entries[i]
		if e.Kind == model.KindFile && need[i] && !e.IsRange() && e.Size <= ringMax {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return nil
	}
	r := uring.Get()
	if r == nil {
		return nil
	}
	return &ringAhead{s: s, entries: entries, idx: idx, ring: r, ctr: ctr, dirs: map[string]int{}}
}

// take returns entry i read whole and checked, if it is the ring's next
// file and the ring read it cleanly; else nil, and the writer opens it.
func (ra *ringAhead) take(i int) *File {
	if ra == nil || ra.next >= len(ra.idx) || ra.idx[ra.next] != i {
		return nil
	}
	k := ra.next
	ra.next++
	if k >= ra.start+len(ra.group) && !ra.load(k) {
		return nil
	}
	g := &ra.group[k-ra.start]
	e := &ra.entries[i]
	st := &g.Stat
	if ra.broken || g.Err != nil || int64(g.N) != e.Size || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != e.Size || st.Mtime != e.MTime {
		return nil // the usual way says what is wrong
	}
	ra.file = File{fd: -1, root: ra.s.Root, path: e.Path, pre: g.Buf[:g.N], inMem: true, checked: true}
	return &ra.file
}

// load reads the group of files that starts at idx[k].
func (ra *ringAhead) load(k int) bool {
	if ra.broken {
		return false
	}
	n := min(ringGroup, len(ra.idx)-k)
	size := 0
	for _, i := range ra.idx[k : k+n] {
		size += int(ra.entries[i].Size)
	}
	if cap(ra.arena) < size {
		ra.arena = make([]byte, size)
	}
	if len(ra.dirs) > ringDirsMax {
		ra.closeDirs()
	}
	ra.group, ra.start = ra.group[:0], k
	off := 0
	for _, i := range ra.idx[k : k+n] {
		e := &ra.entries[i]
		dir, base := path.Split(e.Path)
		dfd, ok := ra.dirs[dir]
		if !ok {
			var err error
			if dfd, err = unix.Open(filepath.Join(ra.s.Root, filepath.FromSlash(dir)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				dfd = -1
			}
			ra.dirs[dir] = dfd
		}
		// (A directory that would not open: its files fail to, and go the
		// usual way, which tells why.)
		ra.group = append(ra.group, uring.File{Dir: dfd, Name: base, Flags: openFlags, Size: e.Size, Buf: ra.arena[off : off+int(e.Size)]})
		off += int(e.Size)
	}
	start := time.Now()
	if err := ra.ring.Load(ra.group); err != nil {
		ra.broken = true
		return false
	}
	// One timing for the group: the source's latency per file, and the
	// stream's read time.
	d := time.Since(start)
	ra.s.IO.Observe(d / time.Duration(n))
	if ra.ctr != nil {
		ra.ctr.ReadNanos.Add(int64(d))
	}
	return true
}

func (ra *ringAhead) closeDirs() {
	for dir, fd := range ra.dirs {
		if fd >= 0 {
			unix.Close(fd)
		}
		delete(ra.dirs, dir)
	}
}

// close releases the batch's directories and gives the ring back.
func (ra *ringAhead) close() {
	if ra == nil {
		return
	}
	ra.closeDirs()
	uring.Put(ra.ring, ra.broken)
	ra.ring = nil
}
