package source

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/holes"
	"github.com/bulkmove/bulkmove/internal/xattrs"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// What a faithful copy sends besides file data: extended attributes and
// ACLs (Source.Xattrs, Source.ACLs) and the map of a sparse file's data
// (Source.Sparse). See package extract (xattr.go, sparse.go) for how they
// travel and land.

// Extras reads what travels with the regular file e besides its data, from
// its open descriptor: its sparse map (nil: dense) and its attributes. A
// problem with the attributes is err: the file still goes, without those
// it could not read.
func (s Source) Extras(f *File, e *model.Entry) (ext []wire.Extent, xs []wire.Xattr, err error) {
	if s.Sparse && e.Size >= wire.SparseMin {
		// (A map of more than wire.MaxExtents sends the smallest holes as
		// zeros.) The seeks keep the offset: a dense file is read from it.
		ext = holes.Data(f.fd, 0, e.Size, wire.MaxExtents)
	}
	if s.Xattrs || s.ACLs {
		xs, err = s.readXattrs(xattrs.Target{Fd: f.fd}, f.Name(), model.KindFile)
		// A name with '=' cannot be a PAX record's key.
		for k := 0; k < len(xs); k++ {
			if strings.Contains(xs[k].Name, "=") {
				err = fmt.Errorf("extended attribute %q of %s: a name with '=' cannot travel in a tar header; not copied", xs[k].Name, f.Name())
				xs = append(xs[:k], xs[k+1:]...)
				k--
			}
		}
	}
	return ext, xs, err
}

// readXattrs reads the attributes of t (named name, for messages) that a
// copy with these options carries: user.*, trusted.* (visible to root
// only) and security.* with -X; the ACLs with -A (a default ACL on a
// directory only). A filesystem without attributes has none.
func (s Source) readXattrs(t xattrs.Target, name string, k model.Kind) ([]wire.Xattr, error) {
	names, err := t.Names()
	if err != nil {
		if xattrs.Unsupported(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list extended attributes of %s: %w", name, err)
	}
	var xs []wire.Xattr
	size := 0
	for _, n := range names {
		if !s.carries(n, k) {
			continue
		}
		v, err := t.Get(n)
		if err == xattrs.ErrNoAttr {
			continue // removed since the listing
		}
		if err != nil {
			return xs, fmt.Errorf("read extended attribute %s of %s: %w", n, name, err)
		}
		if size += len(n) + len(v); size > wire.MaxXattrBytes {
			return xs, fmt.Errorf("extended attributes of %s: over %d bytes; %s and those after it not copied", name, wire.MaxXattrBytes, n)
		}
		xs = append(xs, wire.Xattr{Name: n, Value: string(v)})
	}
	return xs, nil
}

// carries reports whether attribute n of an entry of kind k is sent.
func (s Source) carries(n string, k model.Kind) bool {
	switch {
	case wire.CheckXattrName(n) != nil, s.FakeSuper && xattrs.RsyncPrivate(n):
		return false
	case wire.IsACL(n):
		return s.ACLs && (n == wire.ACLAccess || k == model.KindDir)
	}
	return s.Xattrs
}

// EntryXattrs reads the attributes of a final batch's directories and
// symlinks, for its manifest (nil: none to send). Those that cannot be
// read are reported by warn (as source errors of those entries) and left
// out.
func (s Source) EntryXattrs(entries []model.Entry, warn func(Error)) [][]wire.Xattr {
	if !s.Xattrs && !s.ACLs || s.File != "" {
		return nil
	}
	var all [][]wire.Xattr
	for i := range entries {
		e := &entries[i]
		if e.Kind != model.KindDir && e.Kind != model.KindSymlink {
			continue
		}
		name := filepath.Join(s.Root, filepath.FromSlash(e.Path))
		t := xattrs.Target{Fd: -1, Path: name}
		if e.Kind == model.KindDir {
			fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				warn(Error{i, fmt.Errorf("read extended attributes of %s: %w", name, err)})
				continue
			}
			t.Fd = fd
		}
		xs, err := s.readXattrs(t, name, e.Kind)
		if t.Fd >= 0 {
			unix.Close(t.Fd)
		}
		if err != nil {
			warn(Error{i, err})
		}
		if len(xs) == 0 {
			continue
		}
		if all == nil {
			all = make([][]wire.Xattr, len(entries))
		}
		all[i] = xs
	}
	return all
}

// DataReader reads what of f travels: all of it (f itself, which
// copy_file_range can take), or only the extents' data, in order.
func DataReader(f *File, ext []wire.Extent) io.Reader {
	if ext == nil {
		return f
	}
	return &extentReader{f: f, ext: ext}
}

// extentReader reads the data of a sparse file's extents, one after
// another, with pread.
type extentReader struct {
	f   *File
	ext []wire.Extent
	k   int   // the extent being read
	at  int64 // bytes of it read
}

func (r *extentReader) Read(p []byte) (int, error) {
	for r.k < len(r.ext) && r.at == r.ext[r.k].Len {
		r.k, r.at = r.k+1, 0
	}
	if r.k == len(r.ext) {
		return 0, io.EOF
	}
	x := r.ext[r.k]
	p = p[:min(int64(len(p)), x.Len-r.at)]
	for {
		n, err := unix.Pread(r.f.fd, p, x.Off+r.at)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: err}
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF // shrank: Recheck says so
		}
		r.at += int64(n)
		return n, nil
	}
}
