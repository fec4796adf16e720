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
	// FakeSuper (--fake-super) is rsync's, for this host's end of the job:
	// a SRC here is read through its user.rsync.%stat attributes
	// (sharder.Options.FakeSuper), a DEST here is written as
	// extract.Options.FakeSuper; a local job, both. RemoteFakeSuper
	// (rsync's -M--fake-super) is the same for the remote host's end:
	// the agent of a push, the sender of a pull; of a local job, DEST's.
	// A pull's sender takes it as its FakeSuper (forSender).
	// RemoteSuper (rsync's -M--super) leaves a local job's DEST out of
	// FakeSuper: --fake-super -M--super reads a fake-super SRC and makes
	// DEST for real, as root.
	FakeSuper, RemoteFakeSuper, RemoteSuper bool
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

// fakeSuper says which ends of this job --fake-super applies to: the
// sender reads SRC through user.rsync.%stat, the receiver writes it.
func (j *job) fakeSuper() (read, write bool) {
	f := &j.flags.Faithful
	switch {
	case j.target.hub != nil:
		// A pull's sender: its FakeSuper is the puller's RemoteFakeSuper,
		// and the puller's receiver takes its own (Policy.FakeSuper).
		return f.FakeSuper, false
	case j.target.remote != nil || j.target.serveAddr != "" || j.target.direct != nil:
		// A push; or box1's sender of a remote-to-remote move, where
		// --fake-super is SRC's and -M--fake-super DEST's.
		return f.FakeSuper, f.RemoteFakeSuper
	}
	return f.FakeSuper, f.FakeSuper && !f.RemoteSuper || f.RemoteFakeSuper
}
