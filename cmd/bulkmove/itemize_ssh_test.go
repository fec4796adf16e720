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
// without the data, a deletion; a pull's -i is refused, saying why.
func TestSSHItemize(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("bb\n"), 0o644)
	os.Symlink("a", filepath.Join(src, "link"))
	lines := func(out string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			m[l] = true
		}
		return m
	}
	push := func(want []string, flags ...string) {
		t.Helper()
		out, code := runBM(t, nil, append(append([]string{"--ssh-config", cfg, "-j", "2", "-q", "-i", "--journal", "none"}, flags...), src, "box2:"+dst)...)
		got := lines(out)
		if code != 0 || len(got) != len(want) {
			t.Fatalf("exit %d, %d lines, want 0 and %d (%q):\n%s", code, len(got), len(want), want, out)
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("no line %q:\n%s", w, out)
			}
		}
	}
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

	out, code := runBM(t, nil, "--ssh-config", cfg, "-i", "--journal", "none", "box2:"+src, filepath.Join(dir, "pulled"))
	if code != exitUsage || !strings.Contains(out, "-i (--itemize-changes) is not supported for a pull yet") {
		t.Errorf("a pull with -i: exit %d, want 1 and why:\n%s", code, out)
	}
}
