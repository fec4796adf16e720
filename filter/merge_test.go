package filter

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A merge case: a tree (as rsyncTree: a trailing '/' makes a directory;
// "name=content" a file holding content) and rsync arguments ("FILE:..."
// as in rsyncFilterSets; "ENV:NAME=VALUE" an environment variable).
type mergeCase struct {
	name string
	tree []string
	args []string
}

var mergeTree = []string{
	"a.txt", "b.o", "c.tmp", "keep.o", "core", "x.bak", "notes~", "e.old",
	"d1/a.txt", "d1/b.o", "d1/c.tmp", "d1/keep.o", "d1/foo", "d1/x.log",
	"d1/d2/a.txt", "d1/d2/b.o", "d1/d2/c.tmp", "d1/d2/foo", "d1/d2/x.log", "d1/d2/y.bak",
	"d1/d2/d3/foo", "d1/d2/d3/a.txt", "d1/d2/d3/z.c",
	"other/foo", "other/a.txt", "other/b.o", "other/d1/foo",
	".git/config", "sub/.svn/entries", "sub/tags", "sub/m.c", "sub/n.rej",
}

var mergeCases = []mergeCase{
	{"nested rsync-filter, +/- and inheritance", []string{
		".rsync-filter=- *.tmp\n",
		"d1/.rsync-filter=+ keep.o\n- *.o\n# comment\n- /foo\n",
		"d1/d2/.rsync-filter=+ c.tmp\n- x.log\n",
	}, []string{"-F"}},
	{"-FF excludes the files themselves", []string{
		".rsync-filter=- *.tmp\n",
		"d1/.rsync-filter=- *.o\n",
	}, []string{"-FF"}},
	{"n modifier: not inherited", []string{
		".nofilt=- a.txt\n",
		"d1/.nofilt=- foo\n",
	}, []string{"--filter", ":n .nofilt"}},
	{"anchored patterns are relative to the file's directory", []string{
		"d1/.rules=- /foo\n- /d2/x.log\n- d3/foo\n",
		".rules=- /a.txt\n",
	}, []string{"--filter", "dir-merge .rules"}},
	{"clear in a per-directory file drops what it inherits", []string{
		".rsync-filter=- *.o\n- *.txt\n",
		"d1/d2/.rsync-filter=!\n- foo\n",
	}, []string{"-F"}},
	{"-, + and e modifiers", []string{
		".ex=*.o\nfoo\n",
		"d1/.in=foo\n",
	}, []string{"--filter", ":e- .ex", "--filter", "dir-merge,+e .in", "--exclude", "foo"}},
	{"w modifier", []string{
		"d1/.words=foo  *.o\tx.log\n#c\n",
	}, []string{"--filter", ":w- .words"}},
	{"per-directory rules come before the rules after them", []string{
		"d1/.rsync-filter=+ b.o\n",
	}, []string{"-F", "--exclude", "*.o"}},
	{"earlier global rules win", []string{
		"d1/.rsync-filter=- a.txt\n",
	}, []string{"--include", "a.txt", "-F"}},
	{"sides: s", []string{
		"d1/.rsync-filter=- foo\n+ a.txt\n- *.txt\n",
	}, []string{"--filter", ":s .rsync-filter"}},
	{"sides: r", []string{
		"d1/.rsync-filter=- foo\n",
	}, []string{"--filter", ":r .rsync-filter"}},
	{"sides in the file", []string{
		"d1/.rsync-filter=H foo\nP a.txt\n-r b.o\n",
	}, []string{"-F"}},
	{"merge file", []string{}, []string{"--filter", ". FILE:- *.o\n+ /d1/\n- /d1/d2/\n: .rsync-filter\n", "--exclude", "a.txt"}},
	{"merge file with modifiers", []string{}, []string{"--filter", "merge,- FILE:*.o\nc.tmp\n"}},
	{"-C with .cvsignore and CVSIGNORE", []string{
		".cvsignore=a.txt foo\n",
		"d1/.cvsignore=x.log\n",
		"d1/d2/.cvsignore=!\n",
	}, []string{"-C", "ENV:CVSIGNORE=*.c other"}},
	{"-C and HOME/.cvsignore, after the command line's rules", []string{
		"home/.cvsignore=*.txt\n",
	}, []string{"--include", "keep.o", "-C", "ENV:HOME=HOME"}},
	{":C", []string{
		"d1/.cvsignore=foo *.log\n",
	}, []string{"--filter", ":C"}},
	{"dir-merge above the root: the parents' files", []string{
		"../.rsync-filter=- /src/a.txt\n- b.o\n",
	}, []string{"-F"}},
	{"dir-merge with a path", []string{
		"../top.rules=- c.tmp\n",
		"d1/top.rules=- foo\n",
	}, []string{"--filter", ": ../top.rules"}},
	{"absolute modifier", []string{}, []string{"--filter", "-/ d1/d2/foo", "--filter", "-/ /ROOT/other/foo"}},
	{"duplicate dir-merge is ignored", []string{
		"d1/.rsync-filter=- foo\n",
	}, []string{"-F", "--filter", ":n .rsync-filter"}},
}

func TestRsyncMergeConformance(t *testing.T) {
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not on PATH: the conformance test needs it")
	}
	for i, c := range mergeCases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			base, _ = filepath.EvalSymlinks(base)
			root := filepath.Join(base, "w")
			src := filepath.Join(root, "src")
			makeTree(t, src, append(slices.Clone(mergeTree), c.tree...))
			dst := filepath.Join(base, "dst")
			os.Mkdir(dst, 0o755)
			var args []string
			env := []string{"HOME=" + filepath.Join(src, "nohome"), "CVSIGNORE="}
			for j, a := range c.args {
				a = strings.ReplaceAll(a, "/ROOT", src)
				if kv, ok := strings.CutPrefix(a, "ENV:"); ok {
					kv = strings.ReplaceAll(kv, "=HOME", "="+filepath.Join(src, "home"))
					env = append(env, kv)
					continue
				}
				if pre, content, ok := strings.Cut(a, "FILE:"); ok {
					f := filepath.Join(base, "rules"+string(rune('a'+j)))
					if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
					a = pre + f
				}
				args = append(args, a)
			}
			cmd := exec.Command(rsync)
			cmd.Env = append(os.Environ(), env...)
			cmd.Dir = base
			want := rsyncSends(t, cmd, args, src, dst)

			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			t.Chdir(base)
			r := new(Rules)
			fs := flagSet(r)
			var flags []string
			for _, a := range args {
				if a == "-FF" {
					flags = append(flags, "-F", "-F")
				} else {
					flags = append(flags, a)
				}
			}
			if err := fs.Parse(flags); err != nil {
				t.Fatalf("%q: %v", args, err)
			}
			finishFlags(t, r, fs)
			got := walkScoped(t, src, r)
			if !slices.Equal(got, want) {
				t.Errorf("case %d %q, rules %q:\n only rsync sends %q\n only Rules send %q", i, args, r.List(), minus(want, got), minus(got, want))
			}
		})
	}
}

// makeTree makes the tree of entries under dir (see rsyncTree and
// mergeCase).
func makeTree(t *testing.T, dir string, entries []string) {
	t.Helper()
	for _, n := range entries {
		if name, target, ok := strings.Cut(n, " -> "); ok {
			p := filepath.Join(dir, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		name, content, hasContent := strings.Cut(n, "=")
		if !hasContent {
			content = n
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// walkScoped is walk with the per-directory rules of each directory.
func walkScoped(t *testing.T, src string, r *Rules) []string {
	t.Helper()
	s, err := r.NewScopes(Tree{Root: src})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var visit func(rel string)
	visit = func(rel string) {
		sc, err := s.Enter(rel)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Done()
		des, err := os.ReadDir(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		var subs []string
		for _, de := range des {
			p := de.Name()
			if rel != "." {
				p = rel + "/" + p
			}
			if sc.Dir().Excluded(p, de.IsDir()) {
				continue
			}
			if de.IsDir() {
				got = append(got, p+"/")
				subs = append(subs, p)
			} else {
				got = append(got, p)
			}
		}
		sc.Push(len(subs))
		for _, p := range subs {
			visit(p)
		}
	}
	visit(".")
	if n := s.Held(); n != 0 {
		t.Errorf("after the walk, Scopes holds %d directories' rules", n)
	}
	slices.Sort(got)
	return got
}

// What rsync refuses in a per-directory file, a walk refuses too, naming
// the file and the line.
func TestRsyncMergeRefusals(t *testing.T) {
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not on PATH: the conformance test needs it")
	}
	cases := []struct {
		file, content, rule, want string
	}{
		{"d1/.rsync-filter", "- ok\nx foo\n", "dir-merge /.rsync-filter", "d1/.rsync-filter line 2: filter rule \"x foo\": unknown rule type"},
		{".rsync-filter", "-q foo\n", ": .rsync-filter", ".rsync-filter line 1: filter rule \"-q foo\": invalid modifier 'q'"},
		{"d1/d2/.words", "- foo\n", ":w .words", "d1/d2/.words line 1: filter rule \"-\": missing pattern"},
		{"d1/.f", "H foo\n", ":s .f", "d1/.f line 1: filter rule \"H foo\": a merge file for one side holds a rule for a side"},
		{"d1/.f", "!x\n", ": .f", "d1/.f line 1: filter rule \"!x\": '!' takes no pattern"},
	}
	for _, c := range cases {
		src := t.TempDir()
		makeTree(t, src, append(slices.Clone(mergeTree), c.file+"="+c.content))
		out, err := exec.Command(rsync, "-a", "--dry-run", "--filter", c.rule, src+"/", t.TempDir()+"/").CombinedOutput()
		if err == nil {
			t.Errorf("rsync accepts %q in %s:\n%s", c.content, c.file, out)
		}
		r := new(Rules)
		if err := r.Add(c.rule); err != nil {
			t.Fatal(err)
		}
		s, err := r.NewScopes(Tree{Root: src})
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		var visit func(rel string)
		visit = func(rel string) {
			sc, err := s.Enter(rel)
			if err != nil {
				werr = err
				return
			}
			defer sc.Done()
			des, _ := os.ReadDir(filepath.Join(src, rel))
			for _, de := range des {
				if de.IsDir() && werr == nil {
					sc.Push(1)
					visit(filepath.ToSlash(filepath.Join(rel, de.Name())))
				}
			}
		}
		visit(".")
		want := "filter file " + filepath.Join(src, c.file) + ": "
		if werr == nil || !strings.Contains(werr.Error(), filepath.Join(src, c.file)+" line") || !strings.HasSuffix(werr.Error(), c.want) {
			t.Errorf("%s holding %q: walk error %v, want one naming %s and ending %q", c.file, c.content, werr, want, c.want)
		}
	}
}
