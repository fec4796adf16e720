package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHHostileNames: the remote side chooses the file names of a pull
// and writes the stderr that the pull relays; a hostile host's login
// script writes escape sequences on stderr too (a bare 0x9b is a CSI on
// terminals that take 8-bit controls). With -v, a pull of hostile
// names that fail at DEST, and a push whose remote agent reports failures
// naming them, leave the local terminal nothing to act on: every name and
// every relayed line comes escaped.
func TestSSHHostileNames(t *testing.T) {
	bin := testbin.Build(t)
	home := shmDir(t)
	// Every remote command's stderr starts with a retitle, a screen clear
	// and a bell, as a hostile host would send them.
	rc := "printf 'motd \\033]0;pwned\\007 \\033[2J\\233 \\377\\n' >&2\n"
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "fine"), []byte("fine"), 0o644)
	for _, n := range hostileNames {
		os.WriteFile(filepath.Join(src, n), []byte(n), 0o644)
		os.MkdirAll(filepath.Join(dst, n, "in-the-way"), 0o755) // each fails at DEST
	}
	check := func(what, out string, wants ...string) {
		t.Helper()
		if err := termClean(out); err != nil {
			t.Errorf("%s: the output would act on the terminal: %v\n%s", what, err, out)
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in the output:\n%s", what, w, out)
			}
		}
	}

	// A pull: the remote sender names the files on its stderr, relayed.
	out, code := runBM(t, nil, "--ssh-config", cfg, "-v", "-j", "2", "box2:"+src, dst)
	if code != exitPartial {
		t.Fatalf("pull: exit %d, want %d:\n%s", code, exitPartial, out)
	}
	check("pull", out,
		`box2: bulkmove: receiver: a\x1b]0;pwned\x07b: a non-empty directory is in the way`,
		`new\x0aline: a non-empty directory`,
		`box2: motd \x1b]0;pwned\x07 \x1b[2J\x9b \xff`)
	if b, _ := os.ReadFile(filepath.Join(dst, "fine")); string(b) != "fine" {
		t.Errorf("pull: the other file did not move")
	}

	// A push: the remote agent reports the failures over the wire.
	far := filepath.Join(dir, "far")
	for _, n := range hostileNames {
		os.MkdirAll(filepath.Join(far, n, "in-the-way"), 0o755)
	}
	out, code = runBM(t, nil, "--ssh-config", cfg, "-v", "-j", "2", src, "box2:"+far)
	if code != exitPartial {
		t.Fatalf("push: exit %d, want %d:\n%s", code, exitPartial, out)
	}
	check("push", out,
		`x\x1b[2J: a non-empty directory is in the way`,
		`bad\xff\xfe: a non-empty directory is in the way`)
}
