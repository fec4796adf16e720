package extract

// The hard-link targets of this session: a hard link is made only to a
// regular file this receiver wrote or verified in this session (remember,
// isKnown), held by a hash of the path in bounded memory.

import (
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/bulkmove/bulkmove/internal/hashidx"
)

// KnownMem is how many hard-link targets a receiver keeps in memory (by a
// 64-bit hash of the path, about 16 bytes each in a map: 16 MiB for the
// default 1 Mi). Past it, the hashes go to sorted tables in unlinked
// temporary files in TMPDIR (8 bytes each, merged as they grow; see
// package hashidx), and a hard link whose target is not in memory costs a
// 4 KiB read of each table, from the page cache while the machine has
// memory to spare. Set it before Open.
var KnownMem = hashidx.DefaultSetMem

// remember records p as a hard-link target this job wrote or verified.
// It may come at any time, before or after links to p are applied (a
// later batch, a retried one): the set answers from all it was given. A
// failure to write the set to disk keeps the hashes in memory.
func (r *Receiver) remember(p string) {
	r.known.Add(xxh3.HashString(p))
}

// isKnown reports whether p was remembered; an error is a failure to read
// the part of the set on disk (the link is then not made).
func (r *Receiver) isKnown(p string) (bool, error) {
	ok, err := r.known.Has(xxh3.HashString(p))
	if err != nil {
		return false, fmt.Errorf("looking up the hard-link targets this job wrote: %w", err)
	}
	return ok, nil
}
