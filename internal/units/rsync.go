package units

import (
	"fmt"
	"strconv"
	"strings"
)

// BigNum writes n as rsync writes its numbers (its do_big_num), at a
// human level: 0 plain (1234567), 1 with thousands separators
// (1,234,567: rsync's default), 2 in units of 1000 (1.23M: rsync's -h),
// 3 in units of 1024 (1.18M: -hh). Below one unit, levels 2 and 3 write
// the number as level 1 does.
func BigNum(n int64, human int) string {
	if human > 1 {
		if s, ok := bigUnits(float64(n), human); ok {
			return s
		}
	}
	if human == 0 {
		return strconv.FormatInt(n, 10)
	}
	return Count(n)
}

// BigDNum writes x with decimals digits after the point as rsync writes
// a rate (its human_dnum): in units at human levels 2 and 3 where x is one
// or more, else with thousands separators (1,178,828.00).
func BigDNum(x float64, human, decimals int) string {
	if human > 1 {
		if s, ok := bigUnits(x, human); ok {
			return s
		}
	}
	s := strconv.FormatFloat(x, 'f', decimals, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(whole, 10, 64)
	out := BigNum(n, min(human, 1))
	if whole == "-0" {
		out = "-0"
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}

// bigUnits writes x in rsync's units of 1000 (human 2) or 1024 (3), if x
// is at least one unit.
func bigUnits(x float64, human int) (string, bool) {
	mult := 1000.0
	if human > 2 {
		mult = 1024
	}
	if x < mult && x > -mult {
		return "", false
	}
	const names = "KMGTPE"
	x /= mult
	u := 0
	for (x >= mult || x <= -mult) && u < len(names)-1 {
		x /= mult
		u++
	}
	return fmt.Sprintf("%.2f%c", x, names[u]), true
}
