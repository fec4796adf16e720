package termsafe

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain/name.txt", "plain/name.txt"},
		{"with space", "with space"},
		{"café/日本語/😀", "café/日本語/😀"},
		{"a\x1b]0;pwned\x07b", `a\x1b]0;pwned\x07b`},
		{"x\x1b[2J", `x\x1b[2J`},
		{"line\nbreak", `line\x0abreak`},
		{"cr\rtab\t", `cr\x0dtab\x09`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{`back\slash`, `back\\slash`},
		{`\x1b`, `\\x1b`}, // the escaped form itself stays distinct from ESC
		{"c1 \u0085 \u009b[2J", `c1 \xc2\x85 \xc2\x9b[2J`},
		{"\u00a0nbsp", "\u00a0nbsp"}, // U+00A0 is past C1: printable
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"lone \x9b csi", `lone \x9b csi`},
		{"cut \xe6\x97", `cut \xe6\x97`},
		{"surrogate \xed\xa0\x80", `surrogate \xed\xa0\x80`},
		{"\ufffd real replacement", "\ufffd real replacement"},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`already \x1b escaped \\`, `already \x1b escaped \\`},
		{"raw \x1b[2J\a", `raw \x1b[2J\x07`},
		{"bad \xff", `bad \xff`},
		{"c1 \u009b", `c1 \xc2\x9b`},
	} {
		if got := Sanitize(c.in); got != c.want {
			t.Errorf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// unescape inverts Escape: each \\ is a backslash, each \xHH a byte.
func unescape(t *testing.T, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case i+3 < len(s) && s[i+1] == 'x':
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				t.Fatalf("bad escape at %d in %q", i, s)
			}
			b.WriteByte(byte(v))
			i += 3
		default:
			t.Fatalf("a bare backslash at %d in %q", i, s)
		}
	}
	return b.String()
}

// safe fails t if s holds a control character or invalid UTF-8.
func safe(t *testing.T, what, in, s string) {
	if !utf8.ValidString(s) {
		t.Fatalf("%s(%q) = %q: not valid UTF-8", what, in, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || isC1(r) {
			t.Fatalf("%s(%q) = %q: holds control character %U", what, in, s, r)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a\x1b]0;pwned\x07b", "x\x1b[2J", "a\nb", `a\b`, `\x41`, "A", "\xc2\x9b", "\x9b", "\xff", "日本"} {
		f.Add(s, s+"x")
	}
	f.Add(`\x41`, "A")
	f.Add(`\\`, `\`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := Escape(a), Escape(b)
		safe(t, "Escape", a, ea)
		safe(t, "Sanitize", a, Sanitize(a))
		if got := unescape(t, ea); got != a {
			t.Fatalf("Escape(%q) = %q reads back as %q", a, ea, got)
		}
		if a != b && ea == eb {
			t.Fatalf("Escape(%q) == Escape(%q) == %q", a, b, ea)
		}
		if utf8.ValidString(a) && !strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f || isC1(r) || r == '\\' }) && ea != a {
			t.Fatalf("Escape(%q) = %q: printable UTF-8 changed", a, ea)
		}
	})
}
