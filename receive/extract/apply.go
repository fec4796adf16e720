package extract

// Entries of final batches (Apply): directories (made if missing, then
// owner, mode, mtime and attributes, after everything inside them),
// symlinks, hard links, and devices and special files (special.go). A link is made under a temporary name and
// renamed over what is there; a hard link only to a regular file this
// receiver wrote or verified in this session, and checked to be the file
// that was looked at.

import (
	"fmt"
	"os"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sys/unix"
)

// Apply installs entry i of a final batch: a directory (created, then
// owner, mode and mtime applied), a symlink, a hard link, or a device or
// special file. The sender
// sends symlinks before directories and directories deepest first, so a
// directory's mtime is set after everything inside it.
func (t *Txn) Apply(i int) {
	e := &t.entries[i]
	if t.checkName(i) != nil {
		return
	}
	if e.Kind != model.KindDir && t.leftOut(e) {
		return
	}
	switch e.Kind {
	case model.KindDir:
		t.applyDir(i, e)
	case model.KindSymlink:
		t.applySymlink(i, e)
	case model.KindHardlink:
		t.applyHardlink(i, e)
	case model.KindCharDevice, model.KindBlockDevice, model.KindFIFO, model.KindSocket:
		t.applySpecial(i, e) // see special.go
	default:
		t.fail(i, wire.CodeInvalid, fmt.Errorf("entry %q: a %s in a final batch", e.Path, e.Kind))
	}
}

// leftOut reports whether --existing leaves entry e of a final batch
// out (nothing of its name at DEST), and counts it as skipped.
func (t *Txn) leftOut(e *model.Entry) bool {
	if !t.r.opt.Existing || t.r.exists(e.Path) {
		return false
	}
	t.count(0, 0, 1)
	return true
}

// exists reports whether DEST holds something of the name p (a
// directory in its path that is not one: no), looked up without
// following a symlink, for --existing. DEST itself always exists.
func (r *Receiver) exists(p string) bool {
	if p == "." {
		return true
	}
	d, base := splitDir(p)
	f, err := r.openDir(d, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	var st unix.Stat_t
	return unix.Fstatat(int(f.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

func (t *Txn) applyDir(i int, e *model.Entry) {
	if f := t.openDirEntry(i, e); f != nil {
		t.setDirMeta(i, e, f)
		f.Close()
	}
}

// openDirEntry makes directory entry i, e, if it is missing, and opens
// it; nil if either fails (recorded against the entry), or if
// --existing leaves it out.
func (t *Txn) openDirEntry(i int, e *model.Entry) *os.File {
	if t.leftOut(e) {
		return nil
	}
	seen := t.r.seenDir(e.Path)
	f, err := t.r.makeDir(e.Path)
	if wayBlocked(err) && !seen {
		f, err = t.r.openWay(e.Path, t.aside) // see inway.go
	}
	if err != nil {
		t.failErr(i, "create directory", e.Path, err)
		return nil
	}
	return f
}

// setDirMeta gives directory entry i, e, open as f, its owner, mode,
// mtime and extended attributes.
func (t *Txn) setDirMeta(i int, e *model.Entry, f *os.File) {
	if t.items != nil {
		t.item(i, t.r.dirItems(e, int(f.Fd()))) // before it is set right
	}
	// One this receiver made is not in place (it has the mode and time of
	// its making): no need to look.
	if e.Path != "." && t.r.made(e.Path) || !t.dirInPlace(int(f.Fd()), e) {
		if err := t.setMeta(int(f.Fd()), e, -1); err != nil {
			t.failErr(i, "set metadata of directory", e.Path, err)
			return
		}
	}
	if err := t.setXattrs(int(f.Fd()), -1, "", e, t.xattrsOf(i)); err != nil {
		t.fail(i, Code(err), err)
		return
	}
	if t.r.opt.Fsync {
		f.Sync()
	}
	t.count(1, 0, 0)
}

func (t *Txn) applySymlink(i int, e *model.Entry) {
	if err := CheckLinkTarget(e.Link); err != nil {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing symlink %q: %v", e.Path, err))
		return
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return
	}
	// Already right: leave it (and its directory's mtime) alone. (Under
	// FakeSuper, a regular file holding the target: see fakesuper.go.)
	cur, err := t.r.readlinkAt(int(d.Fd()), base)
	if err == nil && t.r.opt.check() == wire.CheckExisting {
		t.count(0, 0, 1) // --ignore-existing: a symlink there stays as it is
		return
	}
	switch {
	case err != nil:
		t.item(i, wire.ItemNew)
	case t.items != nil:
		// Another target, or the same with another mtime (which
		// setLinkMeta sets).
		var st unix.Stat_t
		if t.r.lstatAt(int(d.Fd()), base, &st) == nil && st.Mtim.Nano() != e.MTime {
			t.item(i, wire.ItemTime)
		}
		if cur != e.Link {
			t.item(i, wire.ItemContent)
		}
	}
	switch {
	case t.r.opt.FakeSuper && err == nil && cur == e.Link:
		t.fakeKeep(i, int(d.Fd()), base, e)
		return
	case t.r.opt.FakeSuper:
		t.fakeMake(i, d, base, e, []byte(e.Link))
		return
	case err == nil && cur == e.Link:
		t.setLinkMeta(i, d, base, e)
		t.count(0, 0, 1)
		return
	}
	tmp := t.tmpName()
	if err := unix.Symlinkat(e.Link, int(d.Fd()), tmp); err != nil {
		t.failErr(i, "create symlink", e.Path, err)
		return
	}
	if err := t.replace(d, tmp, base, e.Path); err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		t.failErr(i, "create symlink", e.Path, err)
		return
	}
	t.setLinkMeta(i, d, base, e)
	t.count(1, 0, 0)
}

func (t *Txn) setLinkMeta(i int, d *os.File, base string, e *model.Entry) {
	if t.r.opt.Owner {
		if err := unix.Fchownat(int(d.Fd()), base, int(e.UID), int(e.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.failErr(i, "chown symlink", e.Path, err)
			return
		}
	}
	ts := []unix.Timespec{{Nsec: utimeOmit}, unix.NsecToTimespec(e.MTime)}
	if err := unix.UtimesNanoAt(int(d.Fd()), base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.failErr(i, "set time of symlink", e.Path, err)
	}
	if err := t.setXattrs(-1, int(d.Fd()), base, e, t.xattrsOf(i)); err != nil {
		t.fail(i, Code(err), err)
	}
}

func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, wire.MaxPath+1)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// replace renames tmp over base in directory d, the entry p, clearing a
// directory in the way first as far as the options allow (see clearDir).
func (t *Txn) replace(d *os.File, tmp, base, p string) error {
	return t.r.renameOver(int(d.Fd()), tmp, int(d.Fd()), base, p, t.aside)
}

func (t *Txn) applyHardlink(i int, e *model.Entry) {
	if err := CheckName(e.Link, model.KindFile); err != nil {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing hard link %q: target %q: %v", e.Path, e.Link, err))
		return
	}
	if ok, err := t.r.isKnown(e.Link); err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	} else if !ok {
		if t.r.opt.Update || t.r.opt.Existing {
			// Its file was left out (newer at DEST, or not there): so is
			// the link, as rsync -H leaves it.
			t.count(0, 0, 1)
			return
		}
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing hard link %q: target %q is not a file this job wrote", e.Path, e.Link))
		return
	}
	// The target and the link each through their directory's descriptor
	// (see openDir), and what was linked checked to be what was looked at.
	ld, lbase, err := t.dir(e.Link)
	if err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	var target unix.Stat_t
	if err := unix.Fstatat(int(ld.Fd()), lbase, &target, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	if target.Mode&unix.S_IFMT != unix.S_IFREG {
		t.fail(i, wire.CodeInvalid, fmt.Errorf("refusing hard link %q: target %q is not a regular file", e.Path, e.Link))
		return
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return
	}
	dfd := int(d.Fd())
	var cur unix.Stat_t
	if err := unix.Fstatat(dfd, base, &cur, unix.AT_SYMLINK_NOFOLLOW); err == nil &&
		(cur.Ino == target.Ino && cur.Dev == target.Dev || cur.Mode&unix.S_IFMT == unix.S_IFREG &&
			(t.r.opt.check() == wire.CheckExisting || t.r.opt.Update && newerAtDest(&cur, e))) {
		t.count(0, 0, 1) // (--ignore-existing: any file there stays as it is; -u: a newer one)
		return
	}
	tmp := t.tmpName()
	if err := unix.Linkat(int(ld.Fd()), lbase, dfd, tmp, 0); err != nil {
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	var linked unix.Stat_t
	if err := unix.Fstatat(dfd, tmp, &linked, unix.AT_SYMLINK_NOFOLLOW); err != nil || linked.Ino != target.Ino || linked.Dev != target.Dev {
		unix.Unlinkat(dfd, tmp, 0)
		t.fail(i, wire.CodeOther, fmt.Errorf("hard link %s: its target %s was replaced while being linked", e.Path, e.Link))
		return
	}
	if err := t.replace(d, tmp, base, e.Path); err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		t.failErr(i, "hard link", e.Path, err)
		return
	}
	t.count(1, 0, 0)
}
