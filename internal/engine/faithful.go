package engine

import (
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// Faithful make a system copy: extended attributes (-X), POSIX ACLs
// (-A), sparse files (--sparse, on by default), devices and special files
// (-D). The sender reads them
// and the receive options tell the receiver to apply them (see package
// extract: xattr.go, sparse.go).
type Faithful struct {
	Xattrs, ACLs, Sparse bool
	// Devices and Specials (--devices, --specials; -D is both): the walk
	// takes devices, and FIFOs and sockets, rather than skip them, and the
	// receiver makes them (devices only as root: see extract.Options).
	Devices, Specials bool
}

// source tells the sender what to read.
func (f *Faithful) source(s *source.Source) {
	s.Xattrs, s.ACLs, s.Sparse = f.Xattrs, f.ACLs, f.Sparse
}

// receive tells the receiver what to accept and apply.
func (f *Faithful) receive(o *wire.ReceiveOptions) {
	o.Xattrs, o.ACLs, o.Sparse = f.Xattrs, f.ACLs, f.Sparse
	o.Devices, o.Specials = f.Devices, f.Specials
}

// walk tells the walk what to take.
func (f *Faithful) walk(o *sharder.Options) {
	o.Devices, o.Specials = f.Devices, f.Specials
}
