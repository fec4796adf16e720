package wire

import (
	"fmt"
	"strings"
)

// Xattr is an extended attribute of an entry (-X), or a POSIX ACL (-A),
// which Linux keeps as the attributes ACLAccess and ACLDefault in the
// kernel's binary format (numeric ids, as the owners travel). A regular
// file's attributes travel in its tar header (PAX SCHILY.xattr.NAME, as GNU
// tar --xattrs writes them); a directory's or a symlink's in its manifest
// entry.
type Xattr struct {
	Name  string
	Value string // bytes, not text
}

// The ACL attributes, and the limits on what a peer may declare.
const (
	ACLAccess  = "system.posix_acl_access"
	ACLDefault = "system.posix_acl_default"
	// XattrCapability holds a file's capabilities: privileges, as a
	// setuid bit is one.
	XattrCapability = "security.capability"

	// MaxXattrBytes bounds the names and values of one entry's attributes
	// together (Linux's limit on one value, XATTR_SIZE_MAX, is 64 KiB; on
	// ext4 all of an inode's attributes fit in one block).
	MaxXattrBytes = 64 << 10
	// MaxXattrName is Linux's XATTR_NAME_MAX.
	MaxXattrName = 255
)

// xattrNamespaces are the attribute namespaces a copy carries: user.*
// (what an ordinary user can set), trusted.* and security.* (SELinux
// labels, file capabilities: only root sets them), and the two ACL names.
var xattrNamespaces = []string{"user.", "trusted.", "security."}

// IsACL reports whether name is one of the POSIX ACL attributes.
func IsACL(name string) bool { return name == ACLAccess || name == ACLDefault }

// CheckXattrName reports whether name is an attribute a copy may carry.
func CheckXattrName(name string) error {
	if len(name) > MaxXattrName || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("invalid attribute name %q", name)
	}
	if IsACL(name) {
		return nil
	}
	for _, ns := range xattrNamespaces {
		if len(name) > len(ns) && strings.HasPrefix(name, ns) {
			return nil
		}
	}
	return fmt.Errorf("attribute %q is outside the namespaces a copy carries (user.*, trusted.*, security.*, %s, %s)", name, ACLAccess, ACLDefault)
}

// CheckXattrs checks one entry's attributes: allowed names, each once,
// and at most MaxXattrBytes of names and values together.
func CheckXattrs(xs []Xattr) error {
	total := 0
	for i, x := range xs {
		if err := CheckXattrName(x.Name); err != nil {
			return err
		}
		total += len(x.Name) + len(x.Value)
		if total > MaxXattrBytes {
			return fmt.Errorf("extended attributes of over %d bytes", MaxXattrBytes)
		}
		for _, y := range xs[:i] {
			if y.Name == x.Name {
				return fmt.Errorf("attribute %q given twice", x.Name)
			}
		}
	}
	return nil
}

// xattrs encodes an entry's attributes: a count, then each name and value.
func (e *enc) xattrs(xs []Xattr) {
	e.uvarint(uint64(len(xs)))
	for _, x := range xs {
		e.bytes(x.Name)
		e.bytes(x.Value)
	}
}

// xattrs decodes what enc.xattrs wrote, bounded by MaxXattrBytes before
// anything is allocated, and checks it.
func (d *dec) xattrs(what string) []Xattr {
	n := d.uvarint(what + " count")
	if d.err != nil {
		return nil
	}
	// Each attribute takes at least 2 bytes (two lengths) and 3 of name.
	if n == 0 || n > MaxXattrBytes/4 || n > uint64(len(d.b))/2 {
		d.err = protoErr("%s: %d attributes in %d bytes", what, n, len(d.b))
		return nil
	}
	xs := make([]Xattr, 0, n)
	total := 0
	for range n {
		x := Xattr{Name: d.str(what+" name", MaxXattrName), Value: d.str(what+" value", MaxXattrBytes)}
		if d.err != nil {
			return nil
		}
		if total += len(x.Name) + len(x.Value); total > MaxXattrBytes {
			d.err = protoErr("%s of over %d bytes", what, MaxXattrBytes)
			return nil
		}
		xs = append(xs, x)
	}
	if err := CheckXattrs(xs); err != nil {
		d.err = fmt.Errorf("%w: %s: %v", ErrProtocol, what, err)
		return nil
	}
	return xs
}
