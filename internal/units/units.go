// Package units reads and writes every size and rate that bulkmove takes
// on its command line, in its config file or over its control endpoint,
// and prints in its messages, so that one rule holds everywhere.
//
// Reading follows rsync 3.x (see ParseSize): K, M, G, T and P are powers of
// 1024, KB, MB, ... powers of 1000, KiB, MiB, ... powers of 1024 again; the
// suffix is case-insensitive; a bare number is bytes, or KiB where rsync
// reads KiB (its --bwlimit, and so ParseRate). Printing is go-humanize's
// IEC form for people (Size, Rate: "12 MiB", "1.5 GiB/s"), thousands
// separators for counts (Count), and Exact for text that must read back
// to the same number ("50MiB", "1000B").
//
// It is a leaf: it imports nothing of bulkmove, and any package may use it.
package units

import (
	"strconv"

	"github.com/dustin/go-humanize"
)

// Size writes a byte count for people in IEC units, as go-humanize does:
// "8 B", "3.0 MiB", "12 MiB", "1.5 GiB". It keeps two significant digits,
// so it is for messages, not for text read back (see Exact).
func Size(n int64) string {
	if n < 0 {
		return "-" + humanize.IBytes(uint64(-n))
	}
	return humanize.IBytes(uint64(n))
}

// Rate writes bytes a second for people: "12 MiB/s".
func Rate(bytesPerSecond int64) string { return Size(bytesPerSecond) + "/s" }

// Count writes a count with thousands separators: "20,000".
func Count(n int64) string { return humanize.Comma(n) }

// Exact writes a byte count that ParseSize (with either Bare rule) and
// ParseRate read back as the same number: in the largest binary unit that
// divides it ("50MiB", "12800KiB"), else in bytes ("1000B").
func Exact(n int64) string {
	if n != 0 {
		for _, u := range []struct {
			size int64
			name string
		}{{1 << 50, "PiB"}, {1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
			if n%u.size == 0 {
				return strconv.FormatInt(n/u.size, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
