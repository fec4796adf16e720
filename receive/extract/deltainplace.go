package extract

// The block delta in place (Options.InPlace, --inplace): for a DEST with
// no room for a second copy of a large file, the receiver hashes DEST's
// file itself, and the blocks that come back are written into it at their
// offsets; the file is cut to its new size and given its metadata where it
// is, and keeps its inode. No block moves (a block is only ever compared
// with the block at its own offset), so writing one never spoils another
// still to be kept.
//
// A patch cut short leaves a torn file: part new, part old, its size and
// mtime whatever they were when it stopped, or set by hand. Before the
// first write the receiver records that the file is being patched: a
// marker beside it (markerName), made durable (fsync of the marker and its
// directory) before the file is touched, and removed only once the
// patched file's sum matched the sender's and its data are on disk
// (fdatasync, whatever --fsync says). The quick check (needRange)
// takes a file with a marker for one that is not up to date, whatever its
// size and mtime say (and whatever -u says), so a later pass sends its
// delta again: the receiver hashes the torn file and the sender sends
// every block that differs, which finishes the patch, checked end to end
// as any delta. A file that takes its name otherwise (sent whole, or
// built in a copy by a pass without --inplace) drops its marker once in
// place. The marker is not a temporary: the sweep of stale temporaries
// never removes it, and --delete keeps it while its file is there
// (keepMarker) and removes it with its file.
//
// Only a regular file with one link is patched in place, opened beneath
// DEST with no symlink followed: rsync's --inplace writes through hard
// links, changing every name of the file, but the other names of a DEST
// file are not this entry's to change. A file with more links goes as the
// delta in a copy. The file is held under an exclusive flock while it is
// patched: a file another process holds locked (a database, another
// receiver patching it) is not written, and fails before its data.

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// InPlacePrefix starts the name of the marker of a file being patched in
// place (markerName).
const InPlacePrefix = ".bulkmove.inplace."

// inPlaceMin is the least size, old and new, of a file patched in place;
// a smaller one goes as the delta in a copy, which needs at most that much
// room. The quick check looks for a marker only beside a file of at least
// this size (at DEST or at SRC): a torn file is never smaller than the
// smaller of its two versions, so no up-to-date small file costs a lookup.
const inPlaceMin = 1 << 20

// markerName is the name of the marker of the file base, in its
// directory: of fixed length, whatever the length of base.
func markerName(base string) string {
	return InPlacePrefix + strconv.FormatUint(xxh3.HashString(base), 16)
}

// ErrLocked marks a file not patched in place because another process
// holds it locked.
var ErrLocked = errors.New("locked by another process")

// inPlaceBase opens DEST's file of e for writing and hashes it in blocks:
// the delta's base is the file itself. Nil and no error: e goes as the
// delta in a copy (deltaBase), or whole.
func (r *Receiver) inPlaceBase(e *model.Entry) (*deltaBase, error) {
	if e.Size < inPlaceMin {
		return nil, nil
	}
	dpath, base := splitDir(e.Path)
	dir, err := r.openDir(dpath, 0)
	if err != nil {
		return nil, nil
	}
	if !regularAt(int(dir.Fd()), base) {
		dir.Close()
		return nil, nil
	}
	fd, err := unix.Openat(int(dir.Fd()), base, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		dir.Close()
		return nil, nil
	}
	b := &deltaBase{dir: dir, fd: fd, inPlace: true, bs: wire.BlockSize(e.Size)}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < inPlaceMin || st.Nlink != 1 {
		b.drop()
		return nil, nil
	}
	if err := flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b.drop()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("receive %s: not patched in place (--inplace): DEST's file is %w (flock)", e.Path, ErrLocked)
		}
		return nil, nil
	}
	// The file grows where it is: room for the growth only.
	var fs unix.Statfs_t
	if grow := e.Size - st.Size; grow > 0 && deltaStatfs(fd, &fs) == nil {
		if free := int64(fs.Bavail) * int64(fs.Bsize); free < grow {
			b.drop()
			return nil, fmt.Errorf("receive %s: no room at DEST for its growth of %s (%s free), patched in place (--inplace): free room at DEST", e.Path, units.Size(grow), units.Size(free))
		}
	}
	b.hashed = min(st.Size, e.Size)
	b.hashes = make([]wire.Sum, wire.BlockCount(b.hashed, b.bs))
	if err := r.hashBlocks(b); err != nil {
		b.drop()
		return nil, nil
	}
	return b, nil
}

// keepMarker reports whether --delete keeps the entry name of the
// directory d (p under the root), named as an in-place marker: a marker
// this receiver wrote whose file is still there. A marker whose file is
// gone is an extra like any other, and goes.
func (pr *pruning) keepMarker(d *os.File, p, name string) bool {
	fd, err := unix.Openat(int(d.Fd()), name, readFlags, 0)
	if err != nil {
		return false
	}
	buf := make([]byte, 4096)
	n, _ := unix.Pread(fd, buf, 0)
	unix.Close(fd)
	var base string
	for _, l := range strings.Split(string(buf[:max(n, 0)]), "\n") {
		if q, ok := strings.CutPrefix(l, "file "); ok {
			base, _ = strconv.Unquote(q)
		}
	}
	var st unix.Stat_t
	if base == "" || markerName(base) != name || unix.Fstatat(int(d.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	if pr.marks == nil {
		pr.marks = map[string]struct{}{}
	}
	pr.marks[path.Join(path.Dir(p), base)] = struct{}{}
	return true
}

// dropMarker removes the marker of the file name of the directory d (p
// under the root), deleted, if keepMarker kept one.
func (pr *pruning) dropMarker(d *os.File, p, name string) {
	if _, ok := pr.marks[p]; ok {
		delete(pr.marks, p)
		unix.Unlinkat(int(d.Fd()), markerName(name), 0)
	}
}

// noRoomHint says what to do about a file whose copy DEST has no room
// for: --inplace, or, given, why it did not apply.
func (r *Receiver) noRoomHint() string {
	switch {
	case !r.opt.InPlace:
		return "free room at DEST, or patch the file where it is with --inplace (see docs/delta.md)"
	case r.backingUp():
		return "free room at DEST (--inplace does not patch a file --backup keeps the old version of)"
	}
	return "free room at DEST (--inplace patches only a regular file of 1 MiB or more with no other hard link at DEST)"
}

// markTorn records, durably, that the file base of the directory dir is
// about to be patched in place: the marker holds the file's name and the
// version it is being patched into.
func markTorn(dir int, base string, e *model.Entry) error {
	name := markerName(base)
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	body := fmt.Sprintf("bulkmove in-place patch\nfile %q\nsize %d\nmtime %d\n", base, e.Size, e.MTime)
	err = pwriteAll(fd, []byte(body), 0)
	if err == nil {
		err = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Fsync(dir)
	}
	if err != nil {
		unix.Unlinkat(dir, name, 0)
	}
	return err
}

// tornAt reports whether the file base of the directory dir has a marker:
// a patch in place began on it and did not end. The receiver remembers it
// (p, its path), so that the file's marker goes once another version of it
// is in place (clearTorn).
func (r *Receiver) tornAt(dir int, base, p string) bool {
	var st unix.Stat_t
	if unix.Fstatat(dir, markerName(base), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	r.torn.Store(p, struct{}{})
	return true
}

// clearTorn removes the marker of the file p (base in the directory dir),
// now in place whole, if the quick check found one.
func (r *Receiver) clearTorn(dir int, base, p string) {
	if _, ok := r.torn.LoadAndDelete(p); ok {
		unix.Unlinkat(dir, markerName(base), 0)
	}
}

// commitInPlace ends the patch in place p: its marker goes once its sum is
// the sender's (want, if the sender sent one); a file the sender dropped
// (it changed while read) or whose sum differs stays marked, for the next
// pass to finish.
func (t *Txn) commitInPlace(p *pendingFile, dropped bool, want wire.Sum, sent bool) {
	e := &t.entries[p.index]
	p.settled = true
	defer t.closeInPlace(p)
	switch {
	case dropped:
		return
	case sent && p.summed && want != p.sum:
		t.fail(p.index, wire.CodeCorrupt, fmt.Errorf("receive %s: the file patched in place does not hash to what the sender read (XXH3-128): left marked as mid-patch, for the next run to finish", e.Path))
		return
	}
	// What the marker's removal promises needs the data on disk first,
	// with --fsync or not (with it, writeDelta synced the file).
	if !t.r.opt.Fsync {
		if err := fdatasync(p.fd); err != nil {
			t.failErr(p.index, "fsync", e.Path, err)
			return
		}
	}
	dfd := int(p.dir.Fd())
	t.r.torn.Delete(e.Path)
	if err := unix.Unlinkat(dfd, markerName(p.base), 0); err != nil && err != unix.ENOENT {
		t.failErr(p.index, "remove the in-place marker of", e.Path, err)
		return
	}
	if t.r.opt.Fsync {
		if err := unix.Fsync(dfd); err != nil {
			t.failErr(p.index, "fsync the directory of", e.Path, err)
			return
		}
	}
	p.placed = true
}

// closeInPlace releases the file patched in place p (and its lock).
func (t *Txn) closeInPlace(p *pendingFile) {
	t.r.setWriting(t.entries[p.index].Path, false)
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
	p.dir.Close()
}
