// Package termsafe makes text safe to show on a terminal or write to a log.
//
// File names are bytes chosen by whoever made the files: on a pull or in
// serve's log that is the other side. Printed raw, a name holding an escape
// sequence can retitle or clear the user's terminal, hide lines or forge
// them (the class of scp's CVE-2019-6109), and a newline in a name can fake a
// line of bulkmove's own output. Escape shows such bytes as `ls -b` does.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// Escape returns s with every control character (C0, DEL, and C1 from
// U+0080 to U+009F), every byte that is not part of valid UTF-8 and every
// backslash escaped: a byte b as \xHH (lower-case hex), a backslash as \\.
// Printable UTF-8 is kept as it is. The result holds no control character
// and is valid UTF-8; distinct inputs give distinct results (each \\ and
// \xHH stands for exactly one byte of s, and no other backslash is left).
func Escape(s string) string { return escape(s, true) }

// Sanitize is Escape but leaves backslashes alone: for text that its writer
// already escaped (a remote bulkmove's stderr, relayed line by line), which
// only must not reach the terminal raw. Its result is as safe as Escape's but
// not unambiguous.
func Sanitize(s string) string { return escape(s, false) }

func escape(s string, backslash bool) string {
	i := firstUnsafe(s, backslash)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\\' && backslash:
				b.WriteString(`\\`)
			case c < 0x20 || c == 0x7f:
				byteEscape(&b, c)
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || isC1(r) {
			for k := range n {
				byteEscape(&b, s[i+k])
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte to escape, len(s) if none.
func firstUnsafe(s string, backslash bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f || (c == '\\' && backslash) {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || isC1(r) {
			return i
		}
		i += n
	}
	return len(s)
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

func byteEscape(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}
