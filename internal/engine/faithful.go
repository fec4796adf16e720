package engine

import (
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// Faithful make a system copy: extended attributes (-X), POSIX ACLs
// (-A) and sparse files (--sparse, on by default). The sender reads them
// and the receive options tell the receiver to apply them (see package
// extract: xattr.go, sparse.go).
type Faithful struct {
	Xattrs, ACLs, Sparse bool
}

// source tells the sender what to read.
func (f *Faithful) source(s *source.Source) {
	s.Xattrs, s.ACLs, s.Sparse = f.Xattrs, f.ACLs, f.Sparse
}

// receive tells the receiver what to accept and apply.
func (f *Faithful) receive(o *wire.ReceiveOptions) {
	o.Xattrs, o.ACLs, o.Sparse = f.Xattrs, f.ACLs, f.Sparse
}
