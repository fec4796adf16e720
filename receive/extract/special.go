package extract

// Devices and special files (-D: Options.Devices, Options.Specials):
// character and block devices, FIFOs and sockets, entries of final
// batches. Each is made by mknodat in its directory's descriptor under a
// temporary name, given its owner, mode and mtime through an O_PATH
// descriptor of the node itself (opening a device or a FIFO for real
// would reach its driver, or wait for a writer; a name looked up again
// could be a symlink by then), and renamed over what is in its place. A
// node of the same type (a device: and number) already there stays, its
// attributes set right where they differ: the quick check of an entry
// without content. A device whose number changed is made again.
//
// Devices only where the job asked for them and the policy granted them
// (Policy.Devices), and where this process may make them (CAP_MKNOD):
// a device is a door to whatever its driver reaches (a disk, memory),
// so a sender that may not make one gets each refused by name.

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// nodeType is the S_IF* type of an entry of kind k (a hard link's is a
// regular file's).
func nodeType(k model.Kind) uint32 {
	switch k {
	case model.KindCharDevice:
		return unix.S_IFCHR
	case model.KindBlockDevice:
		return unix.S_IFBLK
	case model.KindFIFO:
		return unix.S_IFIFO
	case model.KindSocket:
		return unix.S_IFSOCK
	case model.KindDir:
		return unix.S_IFDIR
	case model.KindSymlink:
		return unix.S_IFLNK
	case model.KindFile, model.KindHardlink:
		return unix.S_IFREG
	}
	return 0
}

// rdevOf is the device number of st, as model.Mkdev puts it.
func rdevOf(st *unix.Stat_t) uint64 {
	return model.Mkdev(unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
}

// sameNode reports whether st is a node e describes: its type, and a
// device's number.
func sameNode(st *unix.Stat_t, e *model.Entry) bool {
	return uint32(st.Mode)&unix.S_IFMT == nodeType(e.Kind) && (!e.Kind.IsDevice() || rdevOf(st) == e.Rdev)
}

// mayMake says why entry e, a device or special file, may not be made
// here: not asked for (a sender that sends what its Hello did not ask,
// or the policy did not grant), or a device where this process cannot
// make one. nil: it may.
func (o *Options) mayMake(e *model.Entry) (code int, err error) {
	switch {
	case e.Kind.IsDevice() && !o.Devices:
		return wire.CodeInvalid, fmt.Errorf("refusing %s %q: devices were not asked for (-D) or are not allowed here", e.Kind, e.Path)
	case e.Kind.IsSpecial() && !o.Specials:
		return wire.CodeInvalid, fmt.Errorf("refusing %s %q: special files were not asked for (-D)", e.Kind, e.Path)
	case e.Kind.IsDevice() && !canMknod && !o.FakeSuper:
		return wire.CodePerm, fmt.Errorf("create %s %s: not root: only root (CAP_MKNOD) may make devices", e.Kind, e.Path)
	case e.Kind.IsDevice() && (e.Major() >= 1<<12 || e.Minor() >= 1<<20):
		// Linux's own device numbers: 12 bits of major, 20 of minor;
		// mknod would make another device.
		return wire.CodeOther, fmt.Errorf("create %s %s: device %d:%d: numbers beyond %d:%d cannot be made here", e.Kind, e.Path, e.Major(), e.Minor(), 1<<12-1, 1<<20-1)
	}
	return 0, nil
}

// applySpecial makes entry i, e, a device or special file, or leaves the
// one in its place (see the top of this file).
func (t *Txn) applySpecial(i int, e *model.Entry) {
	if code, err := t.r.opt.mayMake(e); err != nil {
		t.fail(i, code, err)
		return
	}
	d, base, err := t.dir(e.Path)
	if err != nil {
		t.failErr(i, "create directory for", e.Path, err)
		return
	}
	dfd := int(d.Fd())
	var st unix.Stat_t
	switch err := t.r.lstatAt(dfd, base, &st); {
	case err == nil && uint32(st.Mode)&unix.S_IFMT == nodeType(e.Kind) && t.r.opt.check() == wire.CheckExisting:
		t.count(0, 0, 1) // --ignore-existing: one of its type there stays as it is
		return
	case err == nil && sameNode(&st, e):
		t.item(i, t.r.attrItems(&st, e))
		if t.r.opt.FakeSuper {
			t.fakeKeep(i, dfd, base, e) // see fakesuper.go
			return
		}
		if err := t.nodeMeta(dfd, base, e); err != nil {
			t.failErr(i, "set metadata of", e.Path, err)
			return
		}
		t.count(0, 0, 1)
		return
	case err == nil && uint32(st.Mode)&unix.S_IFMT == nodeType(e.Kind):
		t.item(i, wire.ItemContent|t.r.attrItems(&st, e)) // a device of another number
	case err == nil || err == unix.ENOENT:
		t.item(i, wire.ItemNew)
	default:
		t.failErr(i, "create "+e.Kind.String(), e.Path, err)
		return
	}
	if t.r.opt.FakeSuper {
		t.fakeMake(i, d, base, e, nil)
		return
	}
	tmp := t.tmpName()
	// No permission bits until its owner and mode are set: nobody opens
	// it meanwhile.
	if err := mknodat(dfd, tmp, nodeType(e.Kind), e.Major(), e.Minor()); err != nil {
		t.failErr(i, "create "+e.Kind.String(), e.Path, err)
		return
	}
	t.install(i, d, tmp, base, e, t.nodeMeta(dfd, tmp, e))
}

// install renames tmp, made in d for entry i, e, over base, if its making
// went well (err nil); if not, or if the rename fails, tmp goes and the
// entry fails.
func (t *Txn) install(i int, d *os.File, tmp, base string, e *model.Entry, err error) {
	if err == nil {
		err = t.replace(d, tmp, base, e.Path)
	}
	if err != nil {
		unix.Unlinkat(int(d.Fd()), tmp, 0)
		t.failErr(i, "create "+e.Kind.String(), e.Path, err)
		return
	}
	t.count(1, 0, 0)
}

// nodeMeta gives the node name in dfd, which is to be e, e's owner (where
// owners are kept), mode and mtime where they differ, through an O_PATH
// descriptor of it: no symlink followed, no driver reached. A node that
// is not what e describes (swapped meanwhile) fails.
func (t *Txn) nodeMeta(dfd int, name string, e *model.Entry) error {
	fd, err := unix.Openat(dfd, name, oPath|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if !sameNode(&st, e) {
		return fmt.Errorf("replaced while being made (mode %#o)", st.Mode)
	}
	// chmod and utimensat take no O_PATH descriptor: its /proc name,
	// which leads to the node itself, not by a path looked up again.
	self := "/proc/self/fd/" + strconv.Itoa(fd)
	chown := t.r.opt.Owner && (st.Uid != e.UID || st.Gid != e.GID)
	if chown {
		if err := unix.Fchownat(fd, "", int(e.UID), int(e.GID), atEmptyPath); err != nil {
			return err
		}
	}
	if want := t.r.opt.mode(e.Mode); chown || uint32(st.Mode)&0o7777 != want {
		if err := unix.Fchmodat(unix.AT_FDCWD, self, want, 0); err != nil {
			return err
		}
	}
	if st.Mtim.Nano() != e.MTime {
		ts := []unix.Timespec{{Nsec: utimeOmit}, unix.NsecToTimespec(e.MTime)}
		return unix.UtimesNanoAt(unix.AT_FDCWD, self, ts, 0)
	}
	return nil
}
