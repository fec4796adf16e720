package shell

import "testing"

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":             "''",
		"/usr/bin/x":   "/usr/bin/x",
		"a b":          "'a b'",
		"it's":         `'it'\''s'`,
		"$HOME":        "'$HOME'",
		"~/x":          "'~/x'",
		"a;rm -rf /":   "'a;rm -rf /'",
		"v1.2.3+dirty": "v1.2.3+dirty",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"one\n", 3, "one"},
		{"a\nb\n\n  c  \nd\n", 3, "c; d"},
		{"a\nb\nc\nd", 2, "c; d"},
	} {
		if got := LastLines(c.in, c.n); got != c.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
