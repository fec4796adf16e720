package filter

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rsyncTree is the tree of the conformance test: a trailing '/' makes a
// directory, "name -> target" a symlink, anything else a file.
var rsyncTree = []string{
	"a.txt", "b.tmp", "c.o", "keep.o", ".hidden", "sp ace.txt", "br[ack]et", "star*name", `back\slash`,
	"dir1/x.c", "dir1/x.h", "dir1/sub/y.o", "dir1/sub/z.c", "dir1/sub/deeper/w.txt",
	"foo/bar", "x/foo/bar/f", "x/foo/barn",
	"build/out/z.bin", "src/build/q.c", "src/keep/k.o", "src/keep/sub/m.c",
	"cache/in", "a/cache", "a/b/c.txt", "z/a/b/c.txt", "deep/a/b/c/d.txt",
	"empty/", "logs/2024/app.log.gz", "logs/app.log", "logs/gz.d/",
	"link -> dir1", "dangling -> nowhere",
}

// Filter sets, as rsync arguments; "FILE:..." stands for the name of a file
// holding what follows the colon.
var rsyncFilterSets = [][]string{
	{},
	{"--exclude", "*.tmp"},
	{"--exclude", "cache/"},
	{"--exclude", "cache"},
	{"--exclude", "/build"},
	{"--exclude", "build/"},
	{"--exclude", "foo/bar"},
	{"--exclude", "a/b/c.txt"},
	{"--exclude", "/a/b/c.txt"},
	{"--exclude", "deep/a/"},
	{"--exclude", "/deep/a/b/c"},
	{"--exclude", "*/b/*"},
	{"--exclude", "x/*"},
	{"--include", "*/", "--include", "*.c", "--exclude", "*"},
	{"--include", "*/", "--exclude", "*"},
	{"--include", "dir1/***", "--exclude", "*"},
	{"--include", "/src/keep/***", "--include", "/src/", "--exclude", "*"},
	{"--include", "/dir1/", "--include", "/dir1/sub/", "--include", "/dir1/sub/z.c", "--exclude", "*"},
	{"--exclude", "logs/***"},
	{"--exclude", "**/sub"},
	{"--exclude", "/dir1/**/w.txt"},
	{"--exclude", "dir1/**/*.c"},
	{"--exclude", "**.o"},
	{"--exclude", "/logs/**.gz"},
	{"--exclude", "a**"},
	{"--exclude", "**/"},
	{"--exclude", "d*/"},
	{"--exclude", "*.d/"},
	{"--filter", "-! */"},
	{"--filter", "+_*/", "--filter", "exclude *"},
	{"--filter", "-,! */"},
	{"--exclude", "[bs]*"},
	{"--exclude", "[!a-d]*"},
	{"--exclude", "?.txt"},
	{"--exclude", "*[[:space:]]*"},
	{"--exclude", `star\*name`},
	{"--exclude", `back\slash`},
	{"--exclude", `back\\s*`},
	{"--exclude", "br[[]ack]et"},
	{"--exclude", ".*"},
	{"--exclude", "link"},
	{"--exclude", "link/"},
	{"--exclude", "*", "--include", "a.txt"},
	{"--filter", "- *.o", "--filter", "!", "--exclude", "*.c"},
	{"--filter", "P *.o", "--filter", "R *"},
	{"--filter", "S keep.o", "--filter", "H *.o"},
	{"--filter", "-s *.tmp", "--filter", "-r *.o"},
	{"--exclude", "+ keep.o", "--exclude", "*.o"},
	{"--exclude-from", "FILE:# comment\n; comment\n\n*.tmp\n+ keep.o\r\n*.o\n"},
	{"--include-from", "FILE:- *.tmp\n*/\n*.txt\n", "--exclude", "*"},
	{"--include", "*.c", "--exclude-from", "FILE:dir1/\n!\nsrc/\n", "--exclude", "*.h"},
}

func TestRsyncConformance(t *testing.T) {
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not on PATH: the conformance test needs it")
	}
	root := t.TempDir()
	src := filepath.Join(root, "src")
	makeTree(t, src, rsyncTree)
	dst := filepath.Join(root, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}

	for i, set := range rsyncFilterSets {
		args := slices.Clone(set)
		for j, a := range args {
			if content, ok := strings.CutPrefix(a, "FILE:"); ok {
				f := filepath.Join(root, "rules"+strings.Repeat("x", i)+string(rune('a'+j)))
				if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				args[j] = f
			}
		}
		want := rsyncSends(t, exec.Command(rsync), args, src, dst)

		r := new(Rules)
		if err := flagSet(r).Parse(args); err != nil {
			t.Fatalf("%q: %v", set, err)
		}
		got := walk(t, src, r)
		if !slices.Equal(got, want) {
			t.Errorf("filter %q:\n only rsync sends %q\n only Rules send %q", set, minus(want, got), minus(got, want))
		}
	}
}

// rsyncSends runs cmd, an rsync, with args on src and dst, and returns what
// it sends, as walk lists it.
func rsyncSends(t *testing.T, cmd *exec.Cmd, args []string, src, dst string) []string {
	t.Helper()
	cmd.Args = append(append([]string{cmd.Path, "-a", "--dry-run", "--out-format=%n"}, args...), src+"/", dst+"/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rsync %q: %v\n%s", args, err, out)
	}
	var sent []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && l != "./" {
			sent = append(sent, l)
		}
	}
	slices.Sort(sent)
	return sent
}

// minus returns what of a is not in b.
func minus(a, b []string) []string {
	var d []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			d = append(d, s)
		}
	}
	return d
}

// walk lists what a walk of src that applies r sends, as rsync prints it: a
// directory with a trailing '/'. It does not descend into excluded
// directories.
func walk(t *testing.T, src string, r *Rules) []string {
	return walkScoped(t, src, r)
}

// What rsync refuses as a filter rule, Add refuses too.
func TestRsyncRefusesToo(t *testing.T) {
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not on PATH: the conformance test needs it")
	}
	src, dst := t.TempDir(), t.TempDir()
	for _, rule := range []string{"x PAT", "-foo", "-", "- ", "include", "Ps foo", "Hr foo", "! x", "clear x", "-!, foo", "p foo", "excludes foo", "# x"} {
		out, err := exec.Command(rsync, "-a", "--dry-run", "--filter", rule, src+"/", dst+"/").CombinedOutput()
		if err == nil {
			t.Errorf("rsync accepts %q:\n%s", rule, out)
		}
		if err := new(Rules).Add(rule); err == nil {
			t.Errorf("Add(%q): no error; rsync says %s", rule, out)
		}
	}
}
