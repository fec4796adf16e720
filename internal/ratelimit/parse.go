package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate reads a rate in bytes a second the way rclone's --bwlimit
// (and rsync's) take it, and returns 0 for no limit:
//
//   - "off" or any zero ("0", "0M"): no limit;
//   - a number with a suffix K, M, G, T or P: KiB, MiB, GiB, TiB or PiB a
//     second, that is powers of 1024, as in rclone and rsync
//     ("1.5M" is 1,572,864 bytes a second); KiB, MiB, GiB, TiB and PiB
//     say the same thing explicitly;
//   - KB, MB, GB, TB, PB: powers of 1000, as rsync reads them ("1MB" is
//     1,000,000); B: bytes;
//   - a bare number: KiB a second, as rclone and rsync both read it, so that
//     a value copied from either tool's command line means the same here
//     ("512" is 512 KiB/s, not 512 bytes/s; write "512B" for bytes).
//
// Suffixes are case-insensitive and always mean bytes, never bits
// ("10Mb" is 10 MB/s). The number is decimal digits with at most one
// point; signs, exponents, "inf" and "nan", and a rate that is not zero but
// under one byte a second are errors, which name the input.
func ParseRate(s string) (int64, error) {
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	num := strings.TrimRight(s, "KMGTPIBkmgtpib")
	mult, ok := rateUnits[strings.ToLower(s[len(num):])]
	if !ok {
		return 0, fmt.Errorf("rate %q: unknown unit %q (want K, M, G, T, KiB..., KB..., B or none for KiB)", s, s[len(num):])
	}
	if !isDecimal(num) {
		return 0, fmt.Errorf("rate %q: %q is not a decimal number", s, num)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	v = math.Round(v * mult)
	switch {
	case v >= math.MaxInt64:
		return 0, fmt.Errorf("rate %q: too large", s)
	case v == 0 && strings.Trim(num, "0.") != "":
		return 0, fmt.Errorf("rate %q: less than one byte a second (write 0 or off for no limit)", s)
	}
	return int64(v), nil
}

// rateUnits maps ParseRate's lower-cased suffixes to bytes.
var rateUnits = map[string]float64{
	"": 1 << 10, "b": 1,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
}

// isDecimal reports whether s is digits with at most one point among them.
func isDecimal(s string) bool {
	digits, points := 0, 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}
