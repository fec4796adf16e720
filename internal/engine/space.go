package engine

import (
	"fmt"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/transport/local"
)

// destFree is the free space at DEST as the receivers report it (or, for
// a local DEST, as statfs says); 0 if unknown.
func destFree(conns []send.Conn, dstRoot string) int64 {
	for _, c := range conns {
		switch c := c.(type) {
		case *send.Client:
			if c.Peer.Free > 0 {
				return c.Peer.Free
			}
		case *local.Conn:
			return c.Recv.FreeSpace()
		}
	}
	return 0
}

// destSays is what the first receiver says of DEST: whether it is slow,
// each file operation a round trip (NFS, FUSE), so that batches are best
// spread over many directories (sharder.Options.Spread), and what names
// DEST itself (extract.Receiver.Identity; "" if it cannot tell).
func destSays(conns []send.Conn) (slow bool, id string) {
	for _, c := range conns {
		switch c := c.(type) {
		case *send.Client:
			return c.Peer.Slow, c.Peer.DestID
		case *local.Conn:
			return c.Recv.Slow(), c.Recv.Identity()
		}
	}
	return false, ""
}

// checkSpace compares what the walk has planned so far with DEST's free
// space: a warning the first time it is over (files already up to date
// at DEST count too, so this errs on the safe side), or, with
// --require-space, an error that stops the job.
func (j *job) checkSpace(planned int64) error {
	free := j.free.Load()
	if free <= 0 || planned <= free {
		return nil
	}
	msg := fmt.Sprintf("%s has %s free, and the walk has found %s to move so far", j.dst, units.Size(free), units.Size(planned))
	if j.flags.RequireSpace {
		return fmt.Errorf("not enough space: %s (--require-space)", msg)
	}
	if !j.spaceWarned.Swap(true) {
		termsafe.Errorf(j.stderr, "warning: %s; files already there count too, so it may still fit (--require-space to refuse)", msg)
	}
	return nil
}
