package sharder

import "testing"

func TestExcludeMatch(t *testing.T) {
	tests := []struct {
		pats  []string
		rel   string
		isDir bool
		want  bool
	}{
		// No patterns.
		{nil, "a", false, false},
		// Base-name patterns match at any depth.
		{[]string{"*.tmp"}, "x.tmp", false, true},
		{[]string{"*.tmp"}, "a/b/x.tmp", false, true},
		{[]string{"*.tmp"}, "a/b/x.tmp", true, true},
		{[]string{"*.tmp"}, "a/x.tmp/y", false, false},
		{[]string{"*.tmp"}, "x.tmpl", false, false},
		{[]string{"node_modules"}, "web/node_modules", true, true},
		{[]string{"node_modules"}, "node_modules", false, true},
		{[]string{"?.o"}, "src/a.o", false, true},
		{[]string{"?.o"}, "src/ab.o", false, false},
		{[]string{"[ab].c"}, "d/b.c", false, true},
		{[]string{"[ab].c"}, "d/c.c", false, false},
		{[]string{`\*`}, "d/*", false, true},
		{[]string{`\*`}, "d/x", false, false},
		// Patterns with a '/' match the whole relative path.
		{[]string{"a/*.txt"}, "a/x.txt", false, true},
		{[]string{"a/*.txt"}, "b/a/x.txt", false, false},
		{[]string{"a/*.txt"}, "a/b/x.txt", false, false}, // '*' does not cross '/'
		{[]string{"a/b"}, "a/b", true, true},
		{[]string{"a/b"}, "a/b", false, true},
		{[]string{"*/cache"}, "x/cache", true, true},
		{[]string{"*/cache"}, "cache", true, false},
		{[]string{"*/cache"}, "x/y/cache", true, false},
		// A leading '/' anchors at the root.
		{[]string{"/build"}, "build", true, true},
		{[]string{"/build"}, "src/build", true, false},
		{[]string{"/a/b"}, "a/b", false, true},
		{[]string{"/a/b"}, "x/a/b", false, false},
		// A trailing '/' matches directories only.
		{[]string{"cache/"}, "cache", true, true},
		{[]string{"cache/"}, "x/cache", true, true},
		{[]string{"cache/"}, "cache", false, false},
		{[]string{"cache/"}, "x/cache", false, false},
		{[]string{"/cache/"}, "cache", true, true},
		{[]string{"/cache/"}, "x/cache", true, false},
		{[]string{"a/cache/"}, "a/cache", true, true},
		{[]string{"a/cache/"}, "a/cache", false, false},
		// Several patterns: any one matches.
		{[]string{"*.o", "tmp/"}, "tmp", true, true},
		{[]string{"*.o", "tmp/"}, "x.o", false, true},
		{[]string{"*.o", "tmp/"}, "tmp", false, false},
		// Odd names.
		{[]string{"* *"}, "d/a b", false, true},
		{[]string{"a\nb"}, "d/a\nb", false, true},
		{[]string{"\xff*"}, "d/\xffx", false, true},
	}
	for _, tt := range tests {
		x, err := newExcluder(tt.pats)
		if err != nil {
			t.Fatalf("newExcluder(%q): %v", tt.pats, err)
		}
		if got := x.match(tt.rel, tt.isDir); got != tt.want {
			t.Errorf("patterns %q: match(%q, dir=%v) = %v, want %v", tt.pats, tt.rel, tt.isDir, got, tt.want)
		}
	}
}

func TestExcludeBadPatterns(t *testing.T) {
	for _, p := range []string{"", "/", "//", "[", "a/[b", `x\`} {
		if _, err := newExcluder([]string{p}); err == nil {
			t.Errorf("newExcluder(%q): no error", p)
		}
	}
}
