package wire

import (
	"strconv"

	"github.com/bulkmove/bulkmove/model"
)

// PAX records the data stream carries. A batch's file data is a tar stream
// (see the package doc); bulkmove's own records are in the BULKMOVE vendor
// namespace, which other tar readers ignore, and extended attributes use
// the SCHILY.xattr form GNU tar and bsdtar write, so a captured batch still
// reads as a plain tar.
const (
	// PAXBatch is in the global header that opens each batch: the batch's
	// ID in decimal, which the receiver checks against the manifest.
	PAXBatch = "BULKMOVE.batch"

	// PAXRange names the range a tar entry carries, "OFFSET:LENGTH" in
	// decimal (FormatRange): it must match the manifest's entry, and only a
	// range entry may have it.
	PAXRange = "BULKMOVE.range"

	// PAXSparse is a sparse file's map (FormatExtents); the tar entry's
	// size is then its data bytes.
	PAXSparse = "BULKMOVE.sparse"

	// PAXXattr prefixes a regular file's extended attributes in its tar
	// header: PAXXattr+NAME holds attribute NAME's value.
	PAXXattr = "SCHILY.xattr."
)

// FormatRange is the PAXRange value of e.
func FormatRange(e *model.Entry) string {
	return strconv.FormatInt(e.Off, 10) + ":" + strconv.FormatInt(e.Len, 10)
}
