// Package batchname names a batch for people, in -v lines and errors:
// "#17" for the walk's 17th batch rather than its wire id, whose high bits
// say where the batch came from (the sender's pool gives each source its
// own range, and the receiver sees the same ids).
package batchname

import "strconv"

// The ranges of batch ids, as the sender's pool hands them out.
const (
	// SplitBase + Part(17, 2) is the second part of the walk's batch
	// #17, split off to balance the streams (the first part keeps the
	// id); SplitOther + n the n-th part split off a batch whose id or
	// part does not fit (see Part).
	SplitBase  = 1 << 61
	SplitOther = SplitBase + 1<<60
	// FinalBase + n is the n-th batch of the final pass (directories,
	// links, metadata) or of files offered again.
	FinalBase = 1 << 62
	// Retry is the batch of files sent again after failures.
	Retry = 1<<63 - 1
)

// partBits is the room a split id gives the part's number; the walk's
// batch takes the 40 bits above it.
const partBits = 20

// Part is the id of part n (from 2) of the walk's batch root; false
// where they do not fit (a root past 2^40 batches, a part past 2^20).
func Part(root, n uint64) (uint64, bool) {
	if root == 0 || root >= 1<<40 || n < 2 || n >= 1<<partBits {
		return 0, false
	}
	return SplitBase + root<<partBits + n, true
}

// Root is the walk's batch that the batch id is, or is a part of (Part);
// 0 for one of another range.
func Root(id uint64) uint64 {
	switch {
	case id < SplitBase:
		return id
	case id > SplitBase && id < SplitOther:
		return (id - SplitBase) >> partBits
	}
	return 0
}

// Name is the batch's name: "#17" (from the walk), "#17.2" (the second
// part of #17, split off it), "#s3" (split off another), "#f2" (final
// pass), "#retry".
func Name(id uint64) string {
	switch {
	case id == Retry:
		return "#retry"
	case id > FinalBase:
		return "#f" + strconv.FormatUint(id-FinalBase, 10)
	case id > SplitOther:
		return "#s" + strconv.FormatUint(id-SplitOther, 10)
	case id > SplitBase:
		return "#" + strconv.FormatUint(Root(id), 10) + "." + strconv.FormatUint(id&(1<<partBits-1), 10)
	}
	return "#" + strconv.FormatUint(id, 10)
}
