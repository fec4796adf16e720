package extract

// --fake-super on the receiving side (Options.FakeSuper), as rsync's: the
// receiver gives nothing away and makes nothing privileged. Each regular
// file and directory gets the receiving user as owner and its mode's
// permission bits with the owner's read and write (and, for a directory,
// search) added, so that this user can always read and update it; what
// that loses (owner, group, setuid, setgid and sticky bits, the full
// permission bits) goes into user.rsync.%stat in rsync's format
// (internal/xattrs), written only where the file differs from the entry,
// and removed where it no longer does. A device or special file is an
// empty regular file whose %stat records its type and device number; a
// symlink (Linux allows no user.* attribute on one) a regular file
// holding its target, with a %stat of type S_IFLNK: rsync's do_mknod and
// do_symlink under --fake-super.
//
// What is at DEST is looked at through its %stat (view): a second pass
// finds a device made as a file up to date, and an owner recorded as
// the entry's.

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/xattrs"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// view gives st, the fstat of fd, what its %stat records, under
// FakeSuper (an attribute that cannot be read or parsed: as if none, and
// so written again).
func (r *Receiver) view(fd int, st *unix.Stat_t) {
	if r.opt.FakeSuper {
		viewOf(xattrs.Target{Fd: fd}, st)
	}
}

// viewAt is view for the name base in the directory dfd (its last
// component not followed).
func (r *Receiver) viewAt(dfd int, base string, st *unix.Stat_t) {
	if r.opt.FakeSuper {
		viewOf(xattrs.Target{Fd: -1, Path: "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + base}, st)
	}
}

func viewOf(t xattrs.Target, st *unix.Stat_t) {
	if typ := st.Mode & unix.S_IFMT; typ != unix.S_IFREG && typ != unix.S_IFDIR {
		return
	}
	s, ok, err := t.ReadStat()
	if !ok || err != nil {
		return
	}
	setAs(&st.Mode, uint64(s.Mode))
	setAs(&st.Rdev, unix.Mkdev(s.Major, s.Minor))
	st.Uid, st.Gid = s.UID, s.GID
}

// setAs sets *p to v: stat's fields are of other sizes on other systems.
func setAs[T ~uint16 | ~uint32 | ~uint64 | ~int32 | ~int64](p *T, v uint64) { *p = T(v) }

// fstat is unix.Fstat seen through %stat (view).
func (r *Receiver) fstat(fd int, st *unix.Stat_t) error {
	if err := unix.Fstat(fd, st); err != nil {
		return err
	}
	r.view(fd, st)
	return nil
}

// lstatAt is unix.Fstatat of base in dfd, not followed, seen through
// %stat (viewAt).
func (r *Receiver) lstatAt(dfd int, base string, st *unix.Stat_t) error {
	if err := unix.Fstatat(dfd, base, st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	r.viewAt(dfd, base, st)
	return nil
}

// fakeWant is what the regular file or directory st (its own fstat,
// not a view), which stands for e, is to be: its own mode, and the %stat
// that records e (see the top of the file), as rsync's set_stat_xattr
// makes them.
func (r *Receiver) fakeWant(st *unix.Stat_t, e *model.Entry) (mode uint32, want xattrs.Stat) {
	typ := uint32(st.Mode) & unix.S_IFMT
	want = xattrs.Stat{Mode: nodeType(e.Kind) | r.opt.mode(e.Mode), UID: st.Uid, GID: st.Gid}
	if r.opt.Owner {
		want.UID, want.GID = e.UID, e.GID
	}
	if e.Kind.IsDevice() {
		want.Major, want.Minor = e.Major(), e.Minor()
	}
	owner := uint32(0o600)
	if typ == unix.S_IFDIR {
		owner = 0o700
	}
	return typ | want.Mode&0o777 | owner, want
}

// fakeNeeded reports whether a file of mode and owner of st needs a %stat
// to record want: rsync writes none where nothing is lost.
func fakeNeeded(mode uint32, st *unix.Stat_t, want xattrs.Stat) bool {
	return mode != want.Mode || want.Major != 0 || want.Minor != 0 || st.Uid != want.UID || st.Gid != want.GID
}

// fakeInPlace reports whether fd, whose fstat is st, already is what
// fakeMeta would make it.
func (r *Receiver) fakeInPlace(fd int, st *unix.Stat_t, e *model.Entry) bool {
	mode, want := r.fakeWant(st, e)
	if uint32(st.Mode)&0o7777 != mode&0o7777 {
		return false
	}
	have, ok, _ := xattrs.Target{Fd: fd}.ReadStat()
	if !fakeNeeded(mode, st, want) {
		return !ok
	}
	return ok && have == want
}

// fakeMeta gives the regular file or directory fd, which stands for e,
// its own mode and the %stat that records what that mode and its owner
// lose of e's (fakeWant). Nothing is written where all is right already.
func (r *Receiver) fakeMeta(fd int, e *model.Entry) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	mode, want := r.fakeWant(&st, e)
	if uint32(st.Mode)&0o7777 != mode&0o7777 {
		if err := unix.Fchmod(fd, mode&0o7777); err != nil {
			return err
		}
	}
	t := xattrs.Target{Fd: fd}
	have, ok, _ := t.ReadStat()
	if !fakeNeeded(mode, &st, want) {
		if !ok {
			return nil
		}
		if err := t.Remove(xattrs.StatName); err != nil {
			return fmt.Errorf("remove %s: %w", xattrs.StatName, err)
		}
		return nil
	}
	if ok && have == want {
		return nil
	}
	if err := t.Set(xattrs.StatName, []byte(want.Format())); err != nil {
		return fmt.Errorf("set %s: %w", xattrs.StatName, err)
	}
	return nil
}

// fakeKeep gives the regular file base in dfd, already standing for
// entry i, e, its %stat and mtime.
func (t *Txn) fakeKeep(i, dfd int, base string, e *model.Entry) {
	fd, err := unix.Openat(dfd, base, readFlags, 0)
	if err == nil {
		err = t.fakeNodeMeta(fd, e)
		unix.Close(fd)
	}
	if err != nil {
		t.failErr(i, "set metadata of", e.Path, err)
		return
	}
	t.count(0, 0, 1)
}

// fakeMake makes the regular file standing for entry i, e, holding data,
// under a temporary name in d and renames it over base.
func (t *Txn) fakeMake(i int, d *os.File, base string, e *model.Entry, data []byte) {
	dfd := int(d.Fd())
	tmp := t.tmpName()
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.failErr(i, "create "+e.Kind.String(), e.Path, err)
		return
	}
	if len(data) > 0 {
		_, err = unix.Write(fd, data)
	}
	if err == nil {
		err = t.fakeNodeMeta(fd, e)
	}
	unix.Close(fd)
	t.install(i, d, tmp, base, e, err)
}

// fakeNodeMeta gives the regular file fd, standing for the device,
// special file or symlink e, its %stat and mtime.
func (t *Txn) fakeNodeMeta(fd int, e *model.Entry) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("replaced while being made (mode %#o)", st.Mode)
	}
	if err := t.r.fakeMeta(fd, e); err != nil {
		return err
	}
	if st.Mtim.Nano() != e.MTime {
		return dirat.SetMtime(fd, e.MTime)
	}
	return nil
}

// readlinkAt is the target of the symlink base in dfd; under FakeSuper,
// of the regular file standing for one, as rsync's do_readlink: its
// content (a real symlink there is not one kept the fake-super way, and
// is made again as a file).
func (r *Receiver) readlinkAt(dfd int, base string) (string, error) {
	if !r.opt.FakeSuper {
		return readlinkat(dfd, base)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", unix.EINVAL
	}
	fd, err := unix.Openat(dfd, base, readFlags, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	r.view(fd, &st)
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", unix.EINVAL
	}
	buf := make([]byte, wire.MaxPath+1)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
