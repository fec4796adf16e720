package units

import (
	"fmt"
	"math/big"
	"strings"
)

// Bare says how ParseSize reads a number without a unit.
type Bare int

const (
	// BareBytes reads "4096" as 4096 bytes, as rsync reads --max-size,
	// --block-size and its other sizes.
	BareBytes Bare = iota
	// BareKiB reads "512" as 512 KiB, as rsync (and rclone) read --bwlimit.
	BareKiB
)

// ParseSize reads a size the way rsync 3.x reads one:
//
//   - a decimal number, with at most one point ("64", "1.5", ".5");
//   - then an optional unit, its letters in either case: K, M, G, T, P
//     are powers of 1024 ("1.5G" is 1,610,612,736); KB, MB, GB, TB, PB
//     powers of 1000 ("10MB" is 10,000,000); KiB, MiB, GiB, TiB, PiB
//     powers of 1024 again; B alone is bytes. A unit always means bytes,
//     never bits ("10Mb" is 10 MB);
//   - then, as in rsync, an optional "+1" or "-1" ("2G-1");
//   - a number without a unit is read as bare says: bytes or KiB.
//
// A fraction of a byte is rounded to the nearest byte (rsync truncates; the
// two differ by less than a byte). Empty text, spaces, signs in front,
// exponents, other units, a size of 2^63 bytes or more, and a size that is
// not zero but under one byte are errors, which name the input and show
// the forms taken.
func ParseSize(s string, bare Bare) (int64, error) {
	return parse(s, bare, "size")
}

// ParseRate reads a rate in bytes a second as rsync's and rclone's
// --bwlimit take it, and returns 0 for no limit: "off", or any zero ("0",
// "0M"); else ParseSize with BareKiB ("512" is 512 KiB/s: write "512B" for
// bytes). A unit names bytes a second; "/s" is not written.
func ParseRate(s string) (int64, error) {
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	return parse(s, BareKiB, "rate")
}

// parse is ParseSize and ParseRate; what names the value in errors.
func parse(s string, bare Bare, what string) (int64, error) {
	fail := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("%s %q: %s (%s)", what, s, fmt.Sprintf(format, args...), examples(bare, what))
	}
	if s == "" {
		return fail("empty")
	}
	num := s[:len(s)-len(strings.TrimLeft(s, "0123456789."))]
	rest := s[len(num):]
	switch {
	case rest != "" && (rest[0] == '-' || rest[0] == '+') && num == "":
		return fail("a sign in front (sizes are not negative)")
	case num == "":
		return fail("no number in front")
	case !isDecimal(num):
		return fail("%q is not a decimal number", num)
	}
	// rsync's "+1" or "-1" after the unit.
	adjust := int64(0)
	if n := len(rest); n >= 2 && rest[n-1] == '1' && (rest[n-2] == '+' || rest[n-2] == '-') {
		adjust, rest = 1, rest[:n-2]
		if s[len(s)-2] == '-' {
			adjust = -1
		}
	}
	mult, ok := unitBytes(rest, bare)
	if !ok {
		return fail("unknown unit %q", rest)
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return fail("%q is not a decimal number", num)
	}
	v.Mul(v, mult)
	// Round half up: v is not negative.
	n := new(big.Int).Quo(new(big.Int).Add(new(big.Int).Mul(v.Num(), big.NewInt(2)), v.Denom()), new(big.Int).Mul(v.Denom(), big.NewInt(2)))
	n.Add(n, big.NewInt(adjust))
	switch {
	case !n.IsInt64():
		return fail("too large (the most is 8 EiB less one byte)")
	case n.Sign() < 0:
		return fail("negative")
	case n.Sign() == 0 && v.Sign() != 0 && adjust == 0:
		if what == "rate" {
			return fail("less than one byte a second; write 0 or off for no limit")
		}
		return fail("less than one byte")
	}
	return n.Int64(), nil
}

// unitBytes is the number of bytes of one unit named u (case-insensitive).
func unitBytes(u string, bare Bare) (*big.Rat, bool) {
	if u == "" {
		if bare == BareKiB {
			return big.NewRat(1<<10, 1), true
		}
		return big.NewRat(1, 1), true
	}
	u = strings.ToLower(u)
	if u == "b" {
		return big.NewRat(1, 1), true
	}
	reps := strings.IndexByte("kmgtp", u[0]) + 1
	if reps == 0 {
		return nil, false
	}
	base := int64(0)
	switch u[1:] {
	case "", "ib":
		base = 1 << 10
	case "b":
		base = 1000
	default:
		return nil, false
	}
	m := new(big.Int).Exp(big.NewInt(base), big.NewInt(int64(reps)), nil)
	return new(big.Rat).SetInt(m), true
}

// examples lists the forms taken, for error messages.
func examples(bare Bare, what string) string {
	if what == "rate" {
		return "want e.g. 50M or 50MiB (powers of 1024), 50MB (of 1000), 512 (KiB), 100B, or off"
	}
	if bare == BareKiB {
		return "want e.g. 64M or 64MiB (powers of 1024), 64MB (of 1000), 1.5G, 512 (KiB), 100B"
	}
	return "want e.g. 64M or 64MiB (powers of 1024), 64MB (of 1000), 1.5G, 4096 (bytes)"
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
