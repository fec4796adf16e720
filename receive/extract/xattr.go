package extract

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/xattrs"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Extended attributes and POSIX ACLs (-X, -A).
//
// A regular file's attributes are set on its open descriptor after its
// data, owner, mode and times and before it takes its name: a file never
// shows under its final name without them. File capabilities
// (security.capability) are among them, set after the chown that would
// clear them. A directory's are set with its mode, in the final batch; a
// symlink's through its directory's descriptor (lsetxattr), where Linux
// allows (no user.* attributes and no ACLs on symlinks: those are skipped).
//
// The receiver applies user.* with -X, trusted.* and security.* with -X
// where it runs as root (elsewhere they are skipped, as rsync does), file
// capabilities (security.capability) only with --keep-setid as well, and
// the ACLs with -A; each only as far as its Policy allowed (Grant). It gives an entry exactly those attributes: one of
// those namespaces that the entry lacks at the source is removed (an ACL a
// new file inherited from a default ACL, an attribute of a directory that
// was there before). Attributes a sender sends that the options did not
// ask for, or outside those namespaces, are refused.

// FileData is a regular file's data with what travels beside it: Txn.Write
// takes one in place of a plain reader.
type FileData struct {
	R io.Reader
	// Extents, if not nil, makes the file sparse: R yields only the data
	// of the extents, in order, and the rest of the file is holes.
	Extents []wire.Extent
	// Xattrs are the file's extended attributes and ACLs.
	Xattrs []wire.Xattr
	// Delta, if not nil, is a block delta's extents (wire.PAXDelta): R
	// yields their data, written into the file's delta temporary.
	Delta []wire.Extent
	// Zero are a block delta's blocks of zeros (wire.PAXDeltaZero): no
	// data of theirs arrives, and they are made holes.
	Zero []wire.Extent
}

// Read reads the file's data.
func (d *FileData) Read(p []byte) (int, error) { return d.R.Read(p) }

// fileData splits what Write reads into the data and what travels beside
// it (nil: nothing).
func fileData(src io.Reader) (io.Reader, *FileData) {
	if d, ok := src.(*FileData); ok {
		return d.R, d
	}
	return src, nil
}

// checkXattrs refuses attributes that the receive options did not ask for
// or that cannot belong to an entry of kind k, after the wire's checks of
// names and sizes.
func (o *Options) checkXattrs(xs []wire.Xattr, k model.Kind) error {
	if err := wire.CheckXattrs(xs); err != nil {
		return err
	}
	for _, x := range xs {
		switch {
		case !wire.IsACL(x.Name) && !o.Xattrs:
			return fmt.Errorf("extended attribute %q sent, but extended attributes were not asked for (-X)", x.Name)
		case wire.IsACL(x.Name) && !o.ACLs:
			return fmt.Errorf("ACL %s sent, but ACLs were not asked for (-A)", x.Name)
		case x.Name == wire.ACLDefault && k != model.KindDir:
			return fmt.Errorf("a default ACL on a %s", k)
		}
	}
	return nil
}

// managed reports whether this receiver sets (and so also removes)
// attribute name on an entry of kind k.
func (r *Receiver) managed(name string, k model.Kind) bool {
	if wire.IsACL(name) {
		return r.opt.ACLs && k != model.KindSymlink && (name == wire.ACLAccess || k == model.KindDir)
	}
	if !r.opt.Xattrs || r.opt.FakeSuper && xattrs.RsyncPrivate(name) {
		return false // --fake-super's own (fakesuper.go)
	}
	if strings.HasPrefix(name, "user.") {
		return k != model.KindSymlink // Linux allows user.* on files and directories only
	}
	if name == wire.XattrCapability {
		// File capabilities are privileges, as setuid bits are: kept
		// with them alone (KeepSetid, which the receiver's policy
		// allowed), as root.
		return euid == 0 && r.opt.KeepSetid
	}
	if strings.HasPrefix(name, "trusted.") || strings.HasPrefix(name, "security.") {
		// Only root may set them. security.* is never removed: an LSM
		// labels every new file itself (an SELinux label cannot be
		// removed), and only a label the source had replaces it.
		return euid == 0
	}
	return false
}

// setXattrs gives entry e, open as fd (or, for a symlink, named base in the
// directory dfd), the attributes xs that this receiver manages, and
// removes the managed ones it has that xs lacks. Errors name the attribute,
// the entry and the cause.
func (t *Txn) setXattrs(fd, dfd int, base string, e *model.Entry, xs []wire.Xattr) error {
	o := &t.r.opt
	if !o.Xattrs && !o.ACLs {
		return nil
	}
	tg := xattrs.Target{Fd: fd}
	if fd < 0 {
		// No fsetxattr on a symlink: the path through the directory's
		// descriptor, its last component not followed, stays in the root.
		tg.Path = "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + base
	}
	have, err := tg.Names()
	if err != nil && !xattrs.Unsupported(err) {
		return fmt.Errorf("list extended attributes of %s: %w", e.Path, err)
	}
	for _, n := range have {
		if !t.r.managed(n, e.Kind) || strings.HasPrefix(n, "security.") || hasXattr(xs, n) {
			continue
		}
		if err := tg.Remove(n); err != nil {
			return fmt.Errorf("remove extended attribute %s of %s: %w", n, e.Path, err)
		}
		if n == wire.ACLAccess && fd >= 0 {
			// The group bits were the inherited ACL's mask.
			if err := unix.Fchmod(fd, t.r.opt.mode(e.Mode)); err != nil {
				return fmt.Errorf("chmod %s: %w", e.Path, err)
			}
		}
	}
	for _, x := range xs {
		if !t.r.managed(x.Name, e.Kind) {
			continue
		}
		if err := tg.Set(x.Name, []byte(x.Value)); err != nil {
			return fmt.Errorf("set extended attribute %s on %s: %w", x.Name, e.Path, err)
		}
	}
	return nil
}

func hasXattr(xs []wire.Xattr, name string) bool {
	for _, x := range xs {
		if x.Name == name {
			return true
		}
	}
	return false
}

// xattrsOf returns entry i's attributes from the batch's manifest.
func (t *Txn) xattrsOf(i int) []wire.Xattr {
	if i < len(t.xattrs) {
		return t.xattrs[i]
	}
	return nil
}

// SetXattrs gives the batch the attributes of its directories and symlinks
// (the manifest's Xattrs), before ApplyFinal. They are checked against the
// receive options: the error names the entry.
func (t *Txn) SetXattrs(xs [][]wire.Xattr) error {
	for i, x := range xs {
		if len(x) == 0 || i >= len(t.entries) {
			continue
		}
		if err := t.r.opt.checkXattrs(x, t.entries[i].Kind); err != nil {
			return fmt.Errorf("entry %q: %w", t.entries[i].Path, err)
		}
	}
	t.xattrs = xs
	return nil
}

// tarXattrs collects a tar entry's SCHILY.xattr records and checks them
// for a regular file.
func (o *Options) tarXattrs(records map[string]string) ([]wire.Xattr, error) {
	var xs []wire.Xattr
	for k, v := range records {
		if name, ok := strings.CutPrefix(k, wire.PAXXattr); ok {
			xs = append(xs, wire.Xattr{Name: name, Value: v})
		}
	}
	if len(xs) == 0 {
		return nil, nil
	}
	return xs, o.checkXattrs(xs, model.KindFile)
}

// xattrs are the file's attributes (x may be nil: none).
func (x *FileData) xattrs() []wire.Xattr {
	if x == nil {
		return nil
	}
	return x.Xattrs
}
