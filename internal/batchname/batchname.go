// Package batchname names a batch for people, in -v lines and errors:
// "#17" for the walk's 17th batch rather than its wire id, whose high bits
// say where the batch came from (the sender's pool gives each source its
// own range, and the receiver sees the same ids).
package batchname

import "strconv"

// The ranges of batch ids, as the sender's pool hands them out.
const (
	// SplitBase + n is the n-th batch split off another (the second half;
	// the first keeps the id) to balance the streams.
	SplitBase = 1 << 61
	// FinalBase + n is the n-th batch of the final pass (directories,
	// links, metadata) or of files offered again.
	FinalBase = 1 << 62
	// Retry is the batch of files sent again after failures.
	Retry = 1<<63 - 1
)

// Name is the batch's name: "#17" (from the walk), "#s3" (split off
// another), "#f2" (final pass), "#retry".
func Name(id uint64) string {
	switch {
	case id == Retry:
		return "#retry"
	case id > FinalBase:
		return "#f" + strconv.FormatUint(id-FinalBase, 10)
	case id > SplitBase:
		return "#s" + strconv.FormatUint(id-SplitBase, 10)
	}
	return "#" + strconv.FormatUint(id, 10)
}
