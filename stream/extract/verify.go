package extract

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// Verify compares entries with what the destination holds, writing
// nothing: type, size, mtime (files, symlinks are not compared by mtime,
// directories are), permission bits, owner (when the receiver keeps
// owners), symlink targets, hard links (the same inode as their target)
// and, where sums are given, file content. It returns one
// wire.EntryError (code wire.CodeDiffer) per entry that differs, naming
// every difference. Up to hashWorkers entries are examined at once.
func (r *Receiver) Verify(entries []sharder.Entry, sums []wire.Sum) []wire.EntryError {
	var (
		mu   sync.Mutex
		out  []wire.EntryError
		wg   sync.WaitGroup
		jobs = make(chan int)
	)
	for range hashWorkers {
		wg.Go(func() {
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for i := range jobs {
				var sum wire.Sum
				if i < len(sums) {
					sum = sums[i]
				}
				if msg := r.verifyOne(&entries[i], sum, *bp); msg != "" {
					mu.Lock()
					out = append(out, wire.EntryError{Index: i, Code: wire.CodeDiffer, Msg: msg})
					mu.Unlock()
				}
			}
		})
	}
	for i := range entries {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

var kindNames = map[uint32]string{
	unix.S_IFREG: "file", unix.S_IFDIR: "directory", unix.S_IFLNK: "symlink",
	unix.S_IFIFO: "fifo", unix.S_IFSOCK: "socket", unix.S_IFCHR: "device", unix.S_IFBLK: "device",
}

// verifyOne returns what differs between e and the destination ("" if
// nothing), as "what: source X, destination Y" clauses joined by "; ".
func (r *Receiver) verifyOne(e *sharder.Entry, sum wire.Sum, buf []byte) string {
	if err := CheckName(e.Path, e.Kind); err != nil {
		return fmt.Sprintf("name: %v", err)
	}
	st, err := r.lstat(e.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "missing"
		}
		return fmt.Sprintf("cannot examine: %v", err)
	}
	want := map[sharder.Kind]uint32{sharder.KindFile: unix.S_IFREG, sharder.KindHardlink: unix.S_IFREG,
		sharder.KindDir: unix.S_IFDIR, sharder.KindSymlink: unix.S_IFLNK}[e.Kind]
	if got := uint32(st.Mode) & unix.S_IFMT; got != want {
		return fmt.Sprintf("type: source %s, destination %s", kindNames[want], kindNames[got])
	}
	var diffs []string
	add := func(format string, a ...any) { diffs = append(diffs, fmt.Sprintf(format, a...)) }
	switch e.Kind {
	case sharder.KindSymlink:
		target, err := r.root.Readlink(e.Path)
		if err != nil {
			add("link target: cannot read: %v", unwrapPath(err))
		} else if target != e.Link {
			add("link target: source %q, destination %q", e.Link, target)
		}
		return strings.Join(diffs, "; ")
	case sharder.KindHardlink:
		if tst, err := r.lstat(e.Link); err != nil || tst.Ino != st.Ino || tst.Dev != st.Dev {
			add("hard link: not linked to %s", e.Link)
		}
		return strings.Join(diffs, "; ")
	}
	if e.Kind == sharder.KindFile && st.Size != e.Size {
		add("size: source %d, destination %d", e.Size, st.Size)
	}
	if st.Mtim.Nano() != e.MTime {
		add("mtime: source %s, destination %s", stamp(e.MTime), stamp(st.Mtim.Nano()))
	}
	t := Txn{r: r}
	if wantMode := unixmode.Of(t.mode(e.Mode)); uint32(st.Mode)&0o7777 != wantMode {
		add("mode: source %04o, destination %04o", wantMode, uint32(st.Mode)&0o7777)
	}
	if r.opt.Owner && euid == 0 && (st.Uid != e.UID || st.Gid != e.GID) {
		add("owner: source %d:%d, destination %d:%d", e.UID, e.GID, st.Uid, st.Gid)
	}
	if e.Kind == sharder.KindFile && st.Size == e.Size && sum != (wire.Sum{}) {
		f, err := r.root.OpenFile(e.Path, readFlags, 0)
		if err != nil {
			add("content: cannot read: %v", unwrapPath(err))
		} else {
			got, _, err := wire.HashReader(f, buf)
			f.Close()
			switch {
			case err != nil:
				add("content: cannot read: %v", err)
			case got != sum:
				add("content: differs (XXH3-128)")
			}
		}
	}
	return strings.Join(diffs, "; ")
}

// lstat stats p under the root without following a final symlink.
func (r *Receiver) lstat(p string) (*syscall.Stat_t, error) {
	fi, err := r.root.Lstat(p)
	if err != nil {
		return nil, unwrapPath(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("no stat for %s", p)
	}
	return st, nil
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
