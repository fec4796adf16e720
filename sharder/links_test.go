package sharder

import "testing"

// TestUnsafe: rsync's verdicts on the links of its --copy-unsafe-links
// and --safe-links, as rsync 3.x gave them on the same tree.
func TestUnsafe(t *testing.T) {
	for _, c := range []struct {
		rel, target string
		unsafe      bool
	}{
		{"lnk", "a", false},
		{"lnk", "d", false},
		{"lnk", "./a", false},
		{"d/up", "../a", false},
		{"d/e/up", "../../a", false},
		{"d/up", "..", false},
		{"lnk", "../outside", true},
		{"lnk", "..", true},
		{"d/up", "../../a", true},
		{"lnk", "/abs/path", true},
		{"lnk", "", true},
		{"lnk", "d/../a", true},
		{"d/lnk", "x/..", true},
		{"lnk", "../src/a", true},
	} {
		if got := Unsafe(c.rel, c.target); got != c.unsafe {
			t.Errorf("Unsafe(%q, %q) = %v, want %v", c.rel, c.target, got, c.unsafe)
		}
	}
}
