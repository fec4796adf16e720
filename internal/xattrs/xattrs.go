// Package xattrs reads and writes the extended attributes of one file,
// through its open descriptor or, for a symlink (which cannot be opened),
// through a path whose last component is not followed.
package xattrs

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// Target is a file whose attributes are read or set: the open descriptor
// Fd, or, where Fd < 0, Path (the l* calls: a symlink itself).
type Target struct {
	Fd   int
	Path string
}

// Names lists the attribute names of t (those the caller may see: an
// ordinary user is not shown trusted.*).
func (t Target) Names() ([]string, error) {
	buf, err := grow(func(b []byte) (int, error) {
		if t.Fd >= 0 {
			return unix.Flistxattr(t.Fd, b)
		}
		return unix.Llistxattr(t.Path, b)
	})
	if err != nil || len(buf) == 0 {
		return nil, err
	}
	var names []string
	for n := range bytes.SplitSeq(bytes.TrimSuffix(buf, []byte{0}), []byte{0}) {
		names = append(names, string(n))
	}
	return names, nil
}

// Get returns the value of attribute name.
func (t Target) Get(name string) ([]byte, error) {
	return grow(func(b []byte) (int, error) {
		if t.Fd >= 0 {
			return unix.Fgetxattr(t.Fd, name, b)
		}
		return unix.Lgetxattr(t.Path, name, b)
	})
}

// Set sets attribute name to v.
func (t Target) Set(name string, v []byte) error {
	if t.Fd >= 0 {
		return unix.Fsetxattr(t.Fd, name, v, 0)
	}
	return unix.Lsetxattr(t.Path, name, v, 0)
}

// Remove removes attribute name; one that is not there is no error.
func (t Target) Remove(name string) error {
	var err error
	if t.Fd >= 0 {
		err = unix.Fremovexattr(t.Fd, name)
	} else {
		err = unix.Lremovexattr(t.Path, name)
	}
	if err == ErrNoAttr {
		return nil
	}
	return err
}

// grow calls f with a buffer large enough for what it returns: sized by a
// first call with none, again if the value grew in between (ERANGE).
func grow(f func([]byte) (int, error)) ([]byte, error) {
	for range 4 {
		n, err := f(nil)
		if err != nil || n == 0 {
			return nil, err
		}
		b := make([]byte, n)
		n, err = f(b)
		if err == unix.ERANGE {
			continue
		}
		if err != nil {
			return nil, err
		}
		return b[:n], nil
	}
	return nil, unix.ERANGE
}

// Unsupported reports whether err says the filesystem has no attributes
// of that kind.
func Unsupported(err error) bool { return err == unix.ENOTSUP || err == unix.EOPNOTSUPP }
