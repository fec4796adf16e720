package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHItemize: a push's -i lines over SSH, as rsync prints a push's:
// files sent with '<', the directories and symlinks made, a mode set
// without the data, a deletion; and a pull's, printed by the puller as
// rsync prints a pull's: files received with '>'; a push's dry run,
// which changes nothing.
func TestSSHItemize(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("bb\n"), 0o644)
	os.Symlink("a", filepath.Join(src, "link"))
	// The item lines of the output (runBM's holds stderr too: a dry
	// run's plan).
	lines := func(out string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, "bulkmove: dry run: ") {
				m[l] = true
			}
		}
		return m
	}
	// move runs -i from SRC to DEST and checks its lines, in any order.
	move := func(from, to string, want []string, flags ...string) {
		t.Helper()
		out, code := runBM(t, nil, append(append([]string{"--ssh-config", cfg, "-j", "2", "-q", "-i", "--journal", "none"}, flags...), from, to)...)
		got := lines(out)
		if code != 0 || len(got) != len(want) {
			t.Fatalf("%s to %s: exit %d, %d lines, want 0 and %d (%q):\n%s", from, to, code, len(got), len(want), want, out)
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%s to %s: no line %q:\n%s", from, to, w, out)
			}
		}
	}
	push := func(want []string, flags ...string) { t.Helper(); move(src, "box2:"+dst, want, flags...) }
	push([]string{"cd+++++++++ ./", "<f+++++++++ a", "cd+++++++++ sub/", "<f+++++++++ sub/b", "cL+++++++++ link -> a"})
	// A mode changed at the source, a stray file at DEST; the directories'
	// mtimes made alike, so that only those show.
	os.Chmod(filepath.Join(src, "a"), 0o600)
	os.WriteFile(filepath.Join(dst, "stray"), []byte("x"), 0o644)
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	os.Chtimes(dst, st.ModTime(), st.ModTime())
	push([]string{".f...p..... a", "*deleting   stray"}, "--delete")

	// A dry run lists what a push would change, and changes nothing: a
	// new file, a stray to delete; a DEST not there is not made.
	os.WriteFile(filepath.Join(src, "new"), []byte("n\n"), 0o644)
	os.WriteFile(filepath.Join(dst, "stray2"), []byte("x"), 0o644)
	os.Chtimes(src, st.ModTime(), st.ModTime())
	os.Chtimes(dst, st.ModTime(), st.ModTime())
	push([]string{"<f+++++++++ new", "*deleting   stray2"}, "-n", "--delete")
	for _, p := range []string{filepath.Join(dst, "stray2"), filepath.Join(dst, "new")} {
		if _, err := os.Lstat(p); (err == nil) != strings.HasSuffix(p, "stray2") {
			t.Errorf("the dry run changed %s: %v", p, err)
		}
	}
	fresh := filepath.Join(dir, "fresh")
	move(src, "box2:"+fresh, []string{"cd+++++++++ ./", "<f+++++++++ a", "<f+++++++++ new", "cd+++++++++ sub/", "<f+++++++++ sub/b", "cL+++++++++ link -> a"}, "-n")
	if _, err := os.Lstat(fresh); !os.IsNotExist(err) {
		t.Errorf("a dry run made DEST %s: %v", fresh, err)
	}
	os.Remove(filepath.Join(src, "new"))
	os.Remove(filepath.Join(dst, "stray2"))
	os.Chtimes(src, st.ModTime(), st.ModTime())

	pulled := filepath.Join(dir, "pulled")
	pull := func(want []string, flags ...string) { t.Helper(); move("box2:"+src, pulled, want, flags...) }
	pull([]string{"cd+++++++++ ./", ">f+++++++++ a", "cd+++++++++ sub/", ">f+++++++++ sub/b", "cL+++++++++ link -> a"})
	os.Chmod(filepath.Join(src, "a"), 0o640)
	os.WriteFile(filepath.Join(pulled, "stray"), []byte("x"), 0o644)
	os.Chtimes(pulled, st.ModTime(), st.ModTime())
	pull([]string{".f...p..... a", "*deleting   stray"}, "--delete")
	if _, err := os.Lstat(filepath.Join(pulled, "stray")); !os.IsNotExist(err) {
		t.Errorf("pull --delete left stray: %v", err)
	}
}
