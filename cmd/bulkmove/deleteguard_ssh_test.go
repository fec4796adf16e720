package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHDeleteGuard: the --delete guard and --max-delete against a real
// sshd, where the receiver that counts and deletes is the remote agent.
func TestSSHDeleteGuard(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst, empty := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "empty")
	if err := gentree.Small(src, 1200, 12, 16); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	push := func(args ...string) (string, int) {
		return runBM(t, nil, append([]string{"--ssh-config", cfg, "-j", "3"}, args...)...)
	}
	if out, code := push(src, "box2:"+dst); code != 0 {
		t.Fatalf("copy: exit %d:\n%s", code, out)
	}
	files := func() int {
		n := 0
		filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}

	// An empty SRC, and filters that exclude everything: nothing goes.
	for _, args := range [][]string{{"--delete", empty}, {"--delete-excluded", "--exclude", "*", src}} {
		out, code := push(append(args, "box2:"+dst)...)
		if code != exitFatal || !strings.Contains(out, "selected nothing") || !strings.Contains(out, "1212 entries at box2:"+dst+" would go; nothing was deleted") {
			t.Errorf("%q: exit %d, want 3 and the guard's refusal:\n%s", args, code, out)
		}
		if n := files(); n != 1200 {
			t.Fatalf("%q: %d files left at DEST, want all 1200", args, n)
		}
	}

	// More than half of 1212 entries: refused, in the dry run too, then
	// done with --no-delete-guard.
	for d := range 10 {
		os.RemoveAll(filepath.Join(src, fmt.Sprintf("d%04d", d)))
	}
	for _, dry := range []string{"--delete", "-n"} {
		out, code := push("--delete", dry, src, "box2:"+dst)
		if code != exitFatal || !strings.Contains(out, "it would remove 1010 of the 1212 entries it examined at box2:"+dst+", more than half") {
			t.Errorf("%s: exit %d, want 3 and the count:\n%s", dry, code, out)
		}
	}
	if n := files(); n != 1200 {
		t.Fatalf("%d files left at DEST after refusals, want all 1200", n)
	}
	if out, code := push("--delete", "--no-delete-guard", src, "box2:"+dst); code != 0 || !strings.Contains(out, "; 1,010 deleted; 0 errors") {
		t.Fatalf("--no-delete-guard: exit %d, want 0 and 1010 deleted:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})

	// --max-delete 5: exactly 5 of 20 go, exit 25.
	for i := range 20 {
		os.WriteFile(filepath.Join(dst, fmt.Sprintf("stray%02d", i)), []byte("x"), 0o644)
	}
	out, code := push("--delete", "--max-delete", "5", src, "box2:"+dst)
	if code != exitMaxDelete || !strings.Contains(out, "--max-delete 5: stopped after 5 deletions; 15 more not deleted") {
		t.Fatalf("--max-delete 5: exit %d, want 25 and the message:\n%s", code, out)
	}
	if n := files(); n != 200+15 {
		t.Errorf("--max-delete 5: %d files at DEST, want %d", n, 200+15)
	}
}
