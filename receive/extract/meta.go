package extract

// Metadata: owner, mode and mtime are applied through an open
// descriptor, never by a second path lookup that a symlink could
// redirect; owner first, as chown clears setuid bits; setuid and setgid
// are dropped unless asked for (Options.mode). Also whether a file or a
// directory already has an entry's metadata, and their repair in place
// (refresh), so that a pass over an unchanged tree writes nothing.

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/model"
)

// mode is the mode bits, as chmod takes them, that an entry of mode m
// gets: its permission and sticky bits, and its setuid and setgid bits
// only with KeepSetid.
func (o *Options) mode(m fs.FileMode) uint32 {
	if !o.KeepSetid {
		m &^= fs.ModeSetuid | fs.ModeSetgid
	}
	return unixmode.Of(m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
}

// setMeta applies owner, mode and times through the open descriptor. Owner
// first: chown clears setuid bits.
// created is the mode the file was created with, or -1 if unknown.
func (t *Txn) setMeta(fd int, e *model.Entry, created int64) error {
	return t.setMetaWith(dirat.Calls{}, fd, e, created, true)
}

// setMetaWith is setMeta making its calls with sys, and leaving the mtime
// alone unless mtime.
func (t *Txn) setMetaWith(sys dirat.Calls, fd int, e *model.Entry, created int64, mtime bool) error {
	if t.r.opt.FakeSuper {
		if err := t.r.fakeMeta(fd, e); err != nil || !mtime {
			return err
		}
		return sys.SetMtime(fd, e.MTime)
	}
	if t.r.opt.Owner && (int(e.UID) != euid || int(e.GID) != egid || t.setgidDir.Load()) {
		if err := sys.Fchown(fd, int(e.UID), int(e.GID)); err != nil {
			return err
		}
	}
	// A chown clears the setuid and setgid bits and no other: a mode the
	// create gave right (created: permission bits only) stays right,
	// whose owner was set, and one with those bits is set after it.
	if m := t.r.opt.mode(e.Mode); int64(m) != created {
		if err := sys.Fchmod(fd, m); err != nil {
			return err
		}
	}
	if !mtime {
		return nil
	}
	return sys.SetMtime(fd, e.MTime)
}

var (
	euid, egid = os.Geteuid(), os.Getegid()
	umask      = func() uint32 { old := unix.Umask(0); unix.Umask(old); return uint32(old) }()
)

// createMode is the mode a file created with perm(m) gets under the umask:
// when it is already right, no fchmod is needed.
func createMode(m fs.FileMode) uint32 { return uint32(m.Perm()) &^ umask }

// dirInPlace reports whether the directory fd already has e's mode, mtime
// and (when owners are kept) owner: a pass over an unchanged tree then
// writes nothing (on NFS, two round trips less a directory).
func (t *Txn) dirInPlace(fd int, e *model.Entry) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	if t.r.opt.FakeSuper {
		return st.Mtim.Nano() == e.MTime && t.r.fakeInPlace(fd, &st, e)
	}
	if uint32(st.Mode)&0o7777 != t.r.opt.mode(e.Mode)&0o7777 || st.Mtim.Nano() != e.MTime {
		return false
	}
	return !t.r.opt.Owner || int(st.Uid) == int(e.UID) && int(st.Gid) == int(e.GID)
}

// stale reports whether an up-to-date file's metadata differ from e's.
func (r *Receiver) stale(st *unix.Stat_t, e *model.Entry) bool { return r.attrItems(st, e) != 0 }

// refresh gives the open file fd, whose content is up to date, e's owner
// (as root), mode and mtime where they differ.
func (r *Receiver) refresh(fd int, st *unix.Stat_t, e *model.Entry) error {
	if !r.stale(st, e) {
		return nil
	}
	if r.opt.FakeSuper {
		if err := r.fakeMeta(fd, e); err != nil {
			return err
		}
		if st.Mtim.Nano() != e.MTime {
			return dirat.SetMtime(fd, e.MTime)
		}
		return nil
	}
	want := r.opt.mode(e.Mode)
	// Owner first: chown clears setuid bits.
	chown := r.opt.Owner && (st.Uid != e.UID || st.Gid != e.GID)
	if chown {
		if err := unix.Fchown(fd, int(e.UID), int(e.GID)); err != nil {
			return err
		}
	}
	if chown || uint32(st.Mode)&0o7777 != want {
		if err := unix.Fchmod(fd, want); err != nil {
			return err
		}
	}
	if st.Mtim.Nano() != e.MTime {
		return dirat.SetMtime(fd, e.MTime)
	}
	return nil
}

// refreshAt is refresh for the file base in directory dfd, opened only
// when its metadata are stale. It reports whether the file is now up to
// date.
func (r *Receiver) refreshAt(dfd int, base string, st *unix.Stat_t, e *model.Entry) bool {
	if !r.stale(st, e) {
		return true
	}
	fd, err := unix.Openat(dfd, base, readFlags, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if r.fstat(fd, &now) != nil || now.Mode&unix.S_IFMT != unix.S_IFREG || now.Size != e.Size {
		return false
	}
	return r.refresh(fd, &now, e) == nil
}
