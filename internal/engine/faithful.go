package engine

import (
	"flag"

	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// faithfulFlags make a system copy: extended attributes (-X), POSIX ACLs
// (-A) and sparse files (--sparse, on by default). The sender reads them
// and the receive options tell the receiver to apply them (see package
// extract: xattr.go, sparse.go).
type faithfulFlags struct {
	xattrs, acls, sparse bool
}

func (f *faithfulFlags) register(fs *flag.FlagSet) {
	for _, n := range []string{"X", "xattrs"} {
		fs.BoolVar(&f.xattrs, n, false, "copy extended attributes: user.*, and where the receiver runs as root trusted.* and security.* (SELinux labels, file capabilities)")
	}
	for _, n := range []string{"A", "acls"} {
		fs.BoolVar(&f.acls, n, false, "copy POSIX ACLs (access ACLs, and default ACLs of directories)")
	}
	fs.BoolVar(&f.sparse, "sparse", true, "send a file's holes as holes (SEEK_DATA/SEEK_HOLE) and recreate them at DEST; --sparse=false sends them as zeros")
}

// source tells the sender what to read.
func (f *faithfulFlags) source(s *source.Source) {
	s.Xattrs, s.ACLs, s.Sparse = f.xattrs, f.acls, f.sparse
}

// receive tells the receiver what to accept and apply.
func (f *faithfulFlags) receive(o *wire.ReceiveOptions) {
	o.Xattrs, o.ACLs, o.Sparse = f.xattrs, f.acls, f.sparse
}

// args are the flags that give f, for a send-hub (the sender of a pull)
// and the resume journal's key (those that differ from the defaults).
func (f *faithfulFlags) args() []string {
	var a []string
	if f.xattrs {
		a = append(a, "-X")
	}
	if f.acls {
		a = append(a, "-A")
	}
	if !f.sparse {
		a = append(a, "--sparse=false")
	}
	return a
}
