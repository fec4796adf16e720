package filter

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mustRules builds Rules from --filter rules.
func mustRules(t testing.TB, rules ...string) *Rules {
	t.Helper()
	r := new(Rules)
	for _, s := range rules {
		if err := r.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// A path and what the rules should decide for it; a trailing '/' marks a
// directory.
type want struct {
	path     string
	excluded bool
}

func checkExcluded(t *testing.T, r *Rules, rules []string, ws []want) {
	t.Helper()
	for _, w := range ws {
		p, isDir := strings.CutSuffix(w.path, "/")
		if got := r.Excluded(p, isDir); got != w.excluded {
			t.Errorf("rules %q: Excluded(%q, dir=%v) = %v, want %v", rules, p, isDir, got, w.excluded)
		}
	}
}

// The examples of rsync's man page, under "SIMPLE INCLUDE/EXCLUDE EXAMPLE"
// and "PATTERN MATCHING RULES".
func TestManPageExamples(t *testing.T) {
	tests := []struct {
		rules []string
		want  []want
	}{
		// -f'+ x/' -f'+ x/y/' -f'+ x/y/file.txt' -f'- *' x host:/tmp/
		// transfers x/y/file.txt and the directories needed to hold it.
		{[]string{"+ x/", "+ x/y/", "+ x/y/file.txt", "- *"}, []want{
			{"x/", false}, {"x/file.txt", true}, {"x/y/", false},
			{"x/y/file.txt", false}, {"x/y/zzz.txt", true}, {"x/z/", true},
		}},
		// -f'+ file.txt' -f'- *' x/ host:/tmp/x/ copies just file.txt.
		{[]string{"+ file.txt", "- *"}, []want{
			{"file.txt", false}, {"y/", true}, {"z/", true},
		}},
		// -f'- zzz.txt' omits zzz.txt, wherever it is.
		{[]string{"- zzz.txt"}, []want{
			{"x/", false}, {"x/file.txt", false}, {"x/y/zzz.txt", true}, {"zzz.txt", true},
		}},
		// -f'- *.o' excludes all names ending in .o.
		{[]string{"- *.o"}, []want{
			{"a.o", true}, {"x/y/z.o", true}, {"lib.o/", true}, {"a.oo", false}, {"a.o/b", false}, {"o", false},
		}},
		// -f'- /foo' excludes foo in the transfer root.
		{[]string{"- /foo"}, []want{
			{"foo", true}, {"foo/", true}, {"x/foo", false}, {"foobar", false},
		}},
		// -f'- foo/' excludes any directory named foo.
		{[]string{"- foo/"}, []want{
			{"foo/", true}, {"x/y/foo/", true}, {"foo", false}, {"x/foo", false},
		}},
		// -f'- foo/*/bar' excludes bar two levels below a directory foo.
		{[]string{"- foo/*/bar"}, []want{
			{"foo/x/bar", true}, {"a/foo/x/bar", true}, {"foo/x/bar/", true},
			{"foo/bar", false}, {"foo/x/y/bar", false}, {"afoo/x/bar", false},
		}},
		// -f'- /foo/**/bar' excludes bar two or more levels below a top
		// directory foo, but not /foo/bar.
		{[]string{"- /foo/**/bar"}, []want{
			{"foo/x/bar", true}, {"foo/x/y/bar", true},
			{"foo/bar", false}, {"a/foo/x/bar", false}, {"foo/x/barn", false},
		}},
		// -f'+ */' -f'+ *.c' -f'- *' includes all directories and .c files.
		{[]string{"+ */", "+ *.c", "- *"}, []want{
			{"src/", false}, {"src/a.c", false}, {"src/a.h", true}, {"Makefile", true}, {"x.c/", false},
		}},
		// -f'+ foo/' -f'+ foo/bar.c' -f'- *' includes only foo and foo/bar.c.
		{[]string{"+ foo/", "+ foo/bar.c", "- *"}, []want{
			{"foo/", false}, {"foo/bar.c", false}, {"foo/baz.c", true}, {"bar.c", true}, {"other/", true},
		}},
		// "foo" means the last element must be foo; "foo/bar" the last two.
		{[]string{"- foo"}, []want{{"foo", true}, {"a/b/foo/", true}, {"foo/x", false}, {"afoo", false}}},
		{[]string{"- foo/bar"}, []want{
			{"foo/bar", true}, {"a/foo/bar", true}, {"afoo/bar", false}, {"foo/bar/x", false},
		}},
		// A trailing "dir_name/***" matches the directory and all in it.
		{[]string{"- dir_name/***"}, []want{
			{"dir_name/", true}, {"dir_name/a", true}, {"dir_name/a/b/", true}, {"x/dir_name/", true},
			{"dir_name", false}, {"dir_namex/", false},
		}},
		{[]string{"+ /keep/***", "- *"}, []want{
			{"keep/", false}, {"keep/a/b", false}, {"x/", true}, {"x/keep/", true},
		}},
		// -f'-! */' excludes all non-directories.
		{[]string{"-! */"}, []want{{"a/", false}, {"a/b/", false}, {"a/f", true}, {"f", true}}},
		// A backslash escapes only in a pattern with a wildcard.
		{[]string{`- foo\bar`}, []want{{`foo\bar`, true}, {"foobar", false}}},
		{[]string{`- foo\bar*`}, []want{{"foobarx", true}, {`foo\barx`, false}}},
		{[]string{`- foo\\bar*`}, []want{{`foo\barx`, true}, {"foobarx", false}}},
		// '?' is one character but '/'; '*' does not cross '/', "**" does.
		{[]string{"- a?c"}, []want{{"abc", true}, {"d/a.c", true}, {"ac", false}, {"abbc", false}}},
		{[]string{"- a/?/c"}, []want{{"a/b/c", true}, {"a//c", false}}},
		{[]string{"- a*z"}, []want{{"az", true}, {"abcz", true}, {"a/z", false}}},
		{[]string{"- a/*z"}, []want{{"a/bz", true}, {"a/b/z", false}}},
		{[]string{"- a/**z"}, []want{{"a/bz", true}, {"a/b/z", true}, {"x/a/b/c/z", true}, {"a", false}}},
		// A pattern with "**" is matched against the whole path, at any
		// directory boundary unless anchored or starting with "**".
		{[]string{"- a**"}, []want{{"abc", true}, {"x/ab/c", true}, {"xa/b", false}}},
		{[]string{"- **/sub"}, []want{{"sub", true}, {"x/sub", true}, {"x/y/sub/", true}, {"xsub", false}}},
		{[]string{"- **.txt"}, []want{{"a.txt", true}, {"a/b.txt", true}, {"a.txt/b", false}}},
		{[]string{"- /a/**"}, []want{{"a/b", true}, {"a/b/c", true}, {"a", false}, {"x/a/b", false}}},
		// Classes.
		{[]string{"- [ab].c"}, []want{{"d/b.c", true}, {"d/c.c", false}}},
		{[]string{"- [!ab].c"}, []want{{"c.c", true}, {"a.c", false}}},
		{[]string{"- [^ab].c"}, []want{{"c.c", true}, {"a.c", false}}},
		{[]string{"- x[0-9]"}, []want{{"x5", true}, {"xa", false}, {"x-", false}}},
		{[]string{"- x[a-]"}, []want{{"x-", true}, {"xa", true}, {"xb", false}}},
		{[]string{"- x[]a]"}, []want{{"x]", true}, {"xa", true}, {"xb", false}}},
		{[]string{"- x[[:digit:]]"}, []want{{"x7", true}, {"xd", false}}},
		{[]string{"- x[[:upper:][:punct:]]"}, []want{{"xQ", true}, {"x!", true}, {"xq", false}}},
		{[]string{"- x[[:alnum:]]y"}, []want{{"x1y", true}, {"xay", true}, {"x.y", false}}},
		{[]string{"- x[\\]]"}, []want{{"x]", true}, {`x\`, false}}},
		{[]string{"- a[/]b"}, []want{{"a/b", false}}},
		{[]string{"- x[[:foo]"}, []want{{"x[", true}, {"x:", true}, {"xf", true}, {"x]", false}}},
		// Escaped wildcards match themselves.
		{[]string{`- \*`}, []want{{"d/*", true}, {"d/x", false}}},
		{[]string{`- a\?b*`}, []want{{"a?bc", true}, {"axbc", false}}},
		// First match wins.
		{[]string{"+ keep.o", "- *.o"}, []want{{"keep.o", false}, {"x/keep.o", false}, {"a.o", true}}},
		{[]string{"- *.o", "+ keep.o"}, []want{{"keep.o", true}}},
		// P and R rules do not affect what is sent; H and S do.
		{[]string{"P *.o", "R *", "-r x"}, []want{{"a.o", false}, {"x", false}}},
		{[]string{"H *.o", "S keep", "- keep"}, []want{{"a.o", true}, {"keep", false}}},
		{[]string{"-s *.o", "+s a.c", "- *.c"}, []want{{"a.o", true}, {"a.c", false}, {"b.c", true}}},
	}
	for _, tt := range tests {
		checkExcluded(t, mustRules(t, tt.rules...), tt.rules, tt.want)
	}
}

// The cases of the exclude patterns bulkmove had before rsync rules, where
// rsync agrees.
func TestOldExcludeCases(t *testing.T) {
	tests := []struct {
		pats []string
		want []want
	}{
		{nil, []want{{"a", false}}},
		{[]string{"*.tmp"}, []want{
			{"x.tmp", true}, {"a/b/x.tmp", true}, {"a/b/x.tmp/", true}, {"a/x.tmp/y", false}, {"x.tmpl", false},
		}},
		{[]string{"node_modules"}, []want{{"web/node_modules/", true}, {"node_modules", true}}},
		{[]string{"?.o"}, []want{{"src/a.o", true}, {"src/ab.o", false}}},
		{[]string{"[ab].c"}, []want{{"d/b.c", true}, {"d/c.c", false}}},
		{[]string{`\*`}, []want{{"d/*", true}, {"d/x", false}}},
		{[]string{"a/*.txt"}, []want{{"a/x.txt", true}, {"a/b/x.txt", false}}},
		{[]string{"a/b"}, []want{{"a/b/", true}, {"a/b", true}}},
		{[]string{"*/cache"}, []want{{"x/cache/", true}, {"cache/", false}}},
		{[]string{"/build"}, []want{{"build/", true}, {"src/build/", false}}},
		{[]string{"/a/b"}, []want{{"a/b", true}, {"x/a/b", false}}},
		{[]string{"cache/"}, []want{{"cache/", true}, {"x/cache/", true}, {"cache", false}, {"x/cache", false}}},
		{[]string{"/cache/"}, []want{{"cache/", true}, {"x/cache/", false}}},
		{[]string{"a/cache/"}, []want{{"a/cache/", true}, {"a/cache", false}}},
		{[]string{"*.o", "tmp/"}, []want{{"tmp/", true}, {"x.o", true}, {"tmp", false}}},
		{[]string{"* *"}, []want{{"d/a b", true}}},
		{[]string{"a\nb"}, []want{{"d/a\nb", true}}},
		{[]string{"\xff*"}, []want{{"d/\xffx", true}}},
	}
	for _, tt := range tests {
		r := new(Rules)
		for _, p := range tt.pats {
			if err := r.AddExclude(p); err != nil {
				t.Fatal(err)
			}
		}
		checkExcluded(t, r, tt.pats, tt.want)
	}
}

// rsync matches an unanchored pattern with a '/' at the end of the path,
// where the old patterns matched the whole path only.
func TestUnanchoredSlashMatchesDeeper(t *testing.T) {
	r := mustRules(t, "- a/*.txt", "- */cache")
	checkExcluded(t, r, nil, []want{{"b/a/x.txt", true}, {"x/y/cache", true}})
}

func TestRuleSyntax(t *testing.T) {
	tests := []struct {
		rule string
		list string // the rule as List returns it; "" if it clears the list
	}{
		{"- foo", "- foo"},
		{"-_foo", "- foo"},
		{"-  foo", "-  foo"}, // more spaces are part of the pattern
		{"- foo ", "- foo "},
		{"-, foo", "- foo"},
		{"-! foo", "-! foo"},
		{"exclude foo", "- foo"},
		{"exclude_foo", "- foo"},
		{"exclude,! foo", "-! foo"},
		{"include foo/", "+ foo/"},
		{"+ foo", "+ foo"},
		{"+s foo", "+s foo"},
		{"-sr foo", "-sr foo"},
		{"hide foo", "-s foo"},
		{"H foo", "-s foo"},
		{"show foo", "+s foo"},
		{"S foo", "+s foo"},
		{"protect foo", "-r foo"},
		{"P foo", "-r foo"},
		{"P! foo", "-!r foo"},
		{"risk foo", "+r foo"},
		{"R foo", "+r foo"},
		{"!", ""},
		{"clear", ""},
		{"!,", ""},
		{"-/ foo", "-/ foo"},
		{": .rules", ": .rules"},
		{"dir-merge,n- .x", ":n- .x"},
		{":wn+ .x", ":nw+ .x"},
		{":C", ":C .cvsignore"},
		{":Cs x", ":Cs x"},
		{"dir-merge,/r /.f", ":/r /.f"},
	}
	for _, tt := range tests {
		r := mustRules(t, "- before")
		if err := r.Add(tt.rule); err != nil {
			t.Errorf("Add(%q): %v", tt.rule, err)
			continue
		}
		l := r.List()
		if tt.list == "" {
			if len(l) != 0 {
				t.Errorf("Add(%q): list %q, want it cleared", tt.rule, l)
			}
			continue
		}
		if len(l) != 2 || l[1] != tt.list {
			t.Errorf("Add(%q): list %q, want [\"- before\" %q]", tt.rule, l, tt.list)
		}
		// List's form parses back to the same rule.
		r2 := mustRules(t, l...)
		if got := r2.List(); strings.Join(got, "\n") != strings.Join(l, "\n") {
			t.Errorf("Add(%q): list %q parses back as %q", tt.rule, l, got)
		}
	}
}

func TestAddErrors(t *testing.T) {
	tests := []struct{ rule, cause string }{
		{"x PAT", "unknown rule type"},
		{"exclud PAT", "unknown rule type"},
		{"excludes PAT", "unknown rule type"},
		{"p PAT", "unknown rule type"},
		{"# comment", "unknown rule type"},
		{"-", "missing pattern"},
		{"- ", "missing pattern"},
		{"include", "missing pattern"},
		{"-foo", "invalid modifier 'f'"},
		{"-q foo", "invalid modifier 'q'"},
		{"-!, foo", "invalid modifier ','"}, // a ',' only right after the type
		{"Ps foo", "invalid modifier 's'"},
		{"Hr foo", "invalid modifier 'r'"},
		{"-p foo", "modifier 'p' is not supported"},
		{"-x foo", "modifier 'x' is not supported"},
		{"-C x", "'C' takes no pattern"},
		{"-e foo", "invalid modifier 'e'"},
		{"-n foo", "invalid modifier 'n'"},
		{":! .x", "invalid modifier '!'"},
		{":-+ .x", "invalid modifier '+'"},
		{":-C .x", "invalid modifier 'C'"},
		{"HC", "invalid modifier 'C'"},
		{"dir-merge", "missing file name"},
		{". /nonexistent/rules", "merge file: open /nonexistent/rules: no such file or directory"},
		{"! x", "'!' takes no pattern"},
		{"clear x", "'!' takes no pattern"},
		{"- [", "unterminated character class"},
		{"- a/[b", "unterminated character class"},
		{"- [a-", "unterminated character class"},
		{`- [\`, "unterminated character class"},
		{"- [[:alpha:]", "unterminated character class"},
		{"- x[[:foo:]]", `unknown character class "[:foo:]"`},
		{`- x*\`, "trailing backslash"},
		{"- /", "empty pattern"},
		{"- //", "empty pattern"},
		{"- a\x00b", "pattern contains a NUL byte"},
	}
	for _, tt := range tests {
		err := new(Rules).Add(tt.rule)
		want := "filter rule " + strconv.Quote(tt.rule) + ": " + tt.cause
		if err == nil || err.Error() != want {
			t.Errorf("Add(%q) = %v, want %s", tt.rule, err, want)
		}
	}
	// Patterns without a wildcard are literal: a backslash is no escape.
	for _, ok := range []string{`- x\`, `- a\b`, "- ]", "- !"} {
		if err := new(Rules).Add(ok); err != nil {
			t.Errorf("Add(%q): %v", ok, err)
		}
	}
}

func TestOldStylePrefixes(t *testing.T) {
	r := new(Rules)
	for _, s := range []string{"*.tmp", "+ keep.o", "- *.o", "!x", ""} {
		if err := r.AddExclude(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.AddInclude("- *.log"); err != nil {
		t.Fatal(err)
	}
	if err := r.AddInclude("*.c"); err != nil {
		t.Fatal(err)
	}
	checkList(t, r, "- *.tmp", "+ keep.o", "- *.o", "- !x", "- *.log", "+ *.c")
	if err := r.AddInclude("!"); err != nil {
		t.Fatal(err)
	}
	checkList(t, r)
	for _, s := range []string{"- ", "+ "} {
		if err := r.AddExclude(s); err == nil || !strings.Contains(err.Error(), "missing pattern") {
			t.Errorf("AddExclude(%q) = %v", s, err)
		}
	}
}

func TestClear(t *testing.T) {
	r := mustRules(t, "- *.o", "P *.log", "!", "- *.c")
	checkExcluded(t, r, nil, []want{{"a.o", false}, {"a.c", true}})
	if r.Protected("a.log", false, false) {
		t.Error("a P rule before \"!\" still protects")
	}
}

func TestProtected(t *testing.T) {
	tests := []struct {
		rules          []string
		path           string
		deleteExcluded bool
		want           bool
	}{
		{nil, "a.o", false, false},
		{[]string{"- *.o"}, "a.o", false, true},
		{[]string{"- *.o"}, "a.o", true, false},
		{[]string{"- *.o"}, "a.c", false, false},
		{[]string{"+ *.o", "- *"}, "a.o", false, false},
		{[]string{"+ *.o", "- *"}, "a.c", false, true},
		{[]string{"P *.o"}, "a.o", false, true},
		{[]string{"P *.o"}, "a.o", true, true},
		{[]string{"R *.o", "P *"}, "a.o", false, false},
		{[]string{"R *.o", "P *"}, "a.c", false, true},
		{[]string{"R *.o", "- *.o"}, "a.o", false, false},
		{[]string{"+ *.o", "P *.o"}, "a.o", false, false},
		{[]string{"+ *.o", "P *.o"}, "a.o", true, true}, // "+ *.o" is the sender's only
		{[]string{"H *.o"}, "a.o", false, false},
		{[]string{"-s *.o"}, "a.o", false, false},
		{[]string{"-r *.o"}, "a.o", false, true},
		{[]string{"-sr *.o"}, "a.o", true, true},
		{[]string{"-! *.o"}, "a.c", false, true},
		{[]string{"P /keep/***"}, "keep/x/y", false, true},
		{[]string{"P /keep/***"}, "x/keep", false, false},
	}
	for _, tt := range tests {
		r := mustRules(t, tt.rules...)
		if got := r.Protected(tt.path, false, tt.deleteExcluded); got != tt.want {
			t.Errorf("rules %q: Protected(%q, deleteExcluded=%v) = %v, want %v", tt.rules, tt.path, tt.deleteExcluded, got, tt.want)
		}
	}
}

func TestNil(t *testing.T) {
	var r *Rules
	if r.Excluded("a", false) || r.Protected("a", false, false) || r.List() != nil {
		t.Error("a nil *Rules does something")
	}
	if new(Rules).Excluded("a", true) {
		t.Error("empty Rules exclude")
	}
	if mustRules(t, "-! x").Excluded("", false) {
		t.Error("the empty path is excluded")
	}
}

func TestAddFrom(t *testing.T) {
	tests := []struct {
		in    string
		kind  Kind
		from0 bool
		want  []string
	}{
		{"# comment\n; comment\n\n*.tmp\r\n+ keep.o\r- *.o\n!x\n  spaced \nlast", Exclude, false,
			[]string{"- *.tmp", "+ keep.o", "- *.o", "- !x", "-   spaced ", "- last"}},
		{"a\nb\x00#c\x00- d\r\x00!\x00+ e\x00f", Include, true, []string{"+ e", "+ f"}},
		{"- a\n# x\nP b\n!\nR c\nH d/", Filter, false, []string{"+r c", "-s d/"}},
	}
	for _, tt := range tests {
		r := new(Rules)
		if err := r.AddFrom(strings.NewReader(tt.in), tt.kind, tt.from0); err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		checkList(t, r, tt.want...)
	}
	err := new(Rules).AddFrom(strings.NewReader("ok\r\n\r\n[bad\n"), Exclude, false)
	if err == nil || err.Error() != `line 3: filter rule "[bad": unterminated character class` {
		t.Errorf("error %v", err)
	}
}

// checkList checks the rules of r, as List returns them.
func checkList(t *testing.T, r *Rules, want ...string) {
	t.Helper()
	if got := r.List(); !slices.Equal(got, want) {
		t.Errorf("List() = %q, want %q", got, want)
	}
}

// flagSet returns a FlagSet with rsync's five filter options, all adding
// to r.
func flagSet(r *Rules) *flag.FlagSet {
	fs := flag.NewFlagSet("rsync", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(r.Flag(Exclude), "exclude", "")
	fs.Var(r.Flag(Include), "include", "")
	fs.Var(r.Flag(Filter), "filter", "")
	fs.Var(r.FileFlag(Exclude), "exclude-from", "")
	fs.Var(r.FileFlag(Include), "include-from", "")
	fs.Var(r.FFlag(), "F", "")
	fs.Bool("C", false, "")
	return fs
}

// finishFlags does what a command does once fs is parsed: -C adds its
// rules last.
func finishFlags(t *testing.T, r *Rules, fs *flag.FlagSet) {
	t.Helper()
	if fs.Lookup("C").Value.String() == "true" {
		if err := r.AddCVSExclude(); err != nil {
			t.Fatal(err)
		}
	}
}

// The flags keep the command-line order across options.
func TestFlags(t *testing.T) {
	dir := t.TempDir()
	ex := filepath.Join(dir, "ex")
	in := filepath.Join(dir, "in")
	bad := filepath.Join(dir, "bad")
	os.WriteFile(ex, []byte("*.o\n+ keep.o\n"), 0o644)
	os.WriteFile(in, []byte("*.c\n"), 0o644)
	os.WriteFile(bad, []byte("ok\n[\n"), 0o644)
	r := new(Rules)
	err := flagSet(r).Parse([]string{"--include", "a", "--exclude-from", ex, "--filter", "P p", "--exclude", "b", "--include-from", in, "--exclude", "c"})
	if err != nil {
		t.Fatal(err)
	}
	checkList(t, r, "+ a", "- *.o", "+ keep.o", "-r p", "- b", "+ *.c", "- c")
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--filter", "x PAT"}, `invalid value "x PAT" for flag -filter: filter rule "x PAT": unknown rule type`},
		{[]string{"--exclude", "["}, `invalid value "[" for flag -exclude: filter rule "[": unterminated character class`},
		{[]string{"--exclude-from", filepath.Join(dir, "nosuch")}, "no such file or directory"},
		{[]string{"--include-from", bad}, bad + `: line 2: filter rule "[": unterminated character class`},
		{[]string{"--include-from", ""}, "empty file name"},
	} {
		if err := flagSet(new(Rules)).Parse(tt.args); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: error %v, want %q", tt.args, err, tt.err)
		}
	}
}

// The fast paths decide as the general matcher does.
func TestFastPathsAgree(t *testing.T) {
	pats := []string{
		"*", "*.o", "*.tar.gz", "a*", "ab*", "*b*", "*.", ".*", "**", "*x", "x",
		"foo", "/foo", "foo/bar", "/foo/bar", "a/b/c", "foo/", "*/", "*.o/",
	}
	paths := []string{
		"a", "a.o", "b/a.o", "x.tar.gz", "ab", "abc/d", "cab", "a.b", ".hidden", "x", "y/x", "xx",
		"foo", "a/foo", "foo/bar", "a/foo/bar", "afoo/bar", "a/b/c", "z/a/b/c", "za/b/c", "foo/barx",
		`a\b`, "a*", "o",
	}
	for _, p := range pats {
		fast, err := compile(p, true)
		if err != nil {
			t.Fatal(err)
		}
		slow, _ := compile(p, false)
		// The general matcher for literals: the same pattern as a
		// wildcard, since "[x]" matches x.
		for _, path := range paths {
			base := path[strings.LastIndexByte(path, '/')+1:]
			for _, isDir := range []bool{false, true} {
				if f, s := fast.match(path, base, isDir), slow.match(path, base, isDir); f != s {
					t.Errorf("pattern %q, path %q, dir %v: fast %v, general %v", p, path, isDir, f, s)
				}
				if lit := literalAsWild(p); lit != "" {
					w, err := compile(lit, false)
					if err != nil {
						t.Fatal(err)
					}
					if f, s := fast.match(path, base, isDir), w.match(path, base, isDir); f != s {
						t.Errorf("literal %q (as %q), path %q, dir %v: %v, general %v", p, lit, path, isDir, f, s)
					}
				}
			}
		}
	}
}

// literalAsWild returns a wildcard pattern that matches what the literal p
// does ("foo/bar" as "[f]oo/bar"), or "" if p is not a literal.
func literalAsWild(p string) string {
	if strings.ContainsAny(p, `*?[\`) {
		return ""
	}
	i := 0
	for i < len(p) && p[i] == '/' {
		i++
	}
	if i == len(p) || p[i] == '/' {
		return ""
	}
	return p[:i] + "[" + p[i:i+1] + "]" + p[i+1:]
}

func TestExcludedDoesNotAllocate(t *testing.T) {
	r := benchRules(t)
	paths := benchPaths()
	n := testing.AllocsPerRun(100, func() {
		for _, p := range paths {
			r.Excluded(p.path, p.isDir)
			r.Protected(p.path, p.isDir, false)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per run", n)
	}
}

func benchRules(t testing.TB) *Rules {
	return mustRules(t,
		"- .git/", "- node_modules/", "- *.o", "- *.tmp", "- *~", "- /build/",
		"+ /src/keep/***", "- core", "- *.py[co]", "- cache/*/tmp", "- **/.DS_Store",
		"- logs/**.gz", "P /var/",
	)
}

type benchPath struct {
	path  string
	isDir bool
}

func benchPaths() []benchPath {
	return []benchPath{
		{"src/main.go", false}, {"src/pkg/util/strings.go", false}, {"src/pkg/util", true},
		{"lib/a.o", false}, {"a/very/deep/directory/tree/with/a/file.txt", false},
		{"node_modules", true}, {"web/static/app.js", false}, {"docs/README.md", false},
		{"src/keep/x.o", false}, {"x/cache/y/tmp", true}, {"logs/2024/01/app.log.gz", false},
		{"data/part-00001.parquet", false}, {"photos/IMG_0001.JPG", false}, {"src/x.pyc", false},
	}
}

func BenchmarkExcluded(b *testing.B) {
	benchExcluded(b, benchRules(b))
}

// The common case: a few base-name excludes.
func BenchmarkExcludedSimple(b *testing.B) {
	benchExcluded(b, mustRules(b, "- *.o", "- *.tmp", "- .git/", "- node_modules/"))
}

func benchExcluded(b *testing.B, r *Rules) {
	paths := benchPaths()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := paths[i%len(paths)]
		r.Excluded(p.path, p.isDir)
	}
}

func FuzzExcluded(f *testing.F) {
	for _, s := range []string{"- *.o", "+ /a/**/b/", "-! */", "- [[:alpha:]]x", "- a\\", "- dir/***", "- **", "P x"} {
		f.Add(s, "a/b/c.o", false)
		f.Add(s, "dir", true)
	}
	f.Fuzz(func(t *testing.T, rule, path string, isDir bool) {
		r := new(Rules)
		if r.Add(rule) != nil {
			return
		}
		got := r.Excluded(path, isDir)
		r.Protected(path, isDir, false)
		r.Protected(path, isDir, true)
		// The fast paths agree with the general matcher.
		for _, ru := range r.all {
			if ru.m.kind < baseAny || ru.m.kind > baseInfix {
				continue
			}
			slow, err := compile(ru.m.pat, false)
			if err != nil {
				t.Fatal(err)
			}
			slow.dirOnly = ru.m.dirOnly
			base := path[strings.LastIndexByte(path, '/')+1:]
			if f, s := ru.m.match(path, base, isDir), slow.match(path, base, isDir); f != s {
				t.Errorf("rule %q, path %q, dir %v: fast path %v, general matcher %v", rule, path, isDir, f, s)
			}
		}
		// Parsing List's form gives the same rules.
		r2 := new(Rules)
		for _, s := range r.List() {
			if err := r2.Add(s); err != nil {
				t.Fatalf("rule %q listed as %q: %v", rule, s, err)
			}
		}
		if r2.Excluded(path, isDir) != got {
			t.Errorf("rule %q listed as %q decides otherwise", rule, r.List())
		}
	})
}
