package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHStats: --stats over SSH. A push counts what it made and the
// bytes its streams wrote and read; a pull's block comes from the remote
// sender, on stderr (its lines headed by the host, as all the sender
// says); a pull's --out-format lines are the puller's, as received.
func TestSSHStats(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte(strings.Repeat("a", 5000)), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("bb\n"), 0o644)
	os.Symlink("a", filepath.Join(src, "link"))
	want := []string{
		`(?m)^(box2: )?Number of files: 5 \(reg: 2, dir: 2, link: 1\)$`,
		`(?m)^(box2: )?Number of created files: 5 \(reg: 2, dir: 2, link: 1\)$`,
		`(?m)^(box2: )?Number of regular files transferred: 2$`,
		`(?m)^(box2: )?Total file size: 5,004 bytes$`,
		`(?m)^(box2: )?Total bytes sent: [1-9][0-9,]*$`,
		`(?m)^(box2: )?Total bytes received: [1-9][0-9,]*$`,
		`(?m)^(box2: )?total size is 5,004  speedup is [0-9.,]+$`,
	}
	check := func(what, out string) {
		t.Helper()
		for _, w := range want {
			if !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("%s: no line matching %s:\n%s", what, w, out)
			}
		}
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "2", "-q", "--stats", "--journal", "none", src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("push: exit %d\n%s", code, out)
	}
	check("push", out)

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "--ssh-config", cfg, "-j", "2", "-q", "--stats", "--journal", "none", "box2:"+src, filepath.Join(dir, "pulled"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("pull: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	check("pull's stderr", stderr.String())

	// A pull's --out-format: its lines where the pull was typed, as
	// received.
	pulled := filepath.Join(dir, "pulled2")
	out, code = runBM(t, nil, "--ssh-config", cfg, "-q", "--out-format", "%o %n %l %f", "--journal", "none", "box2:"+src, pulled)
	if line := "recv a 5000 " + pulled + "/a"; code != 0 || !strings.Contains(out, line+"\n") {
		t.Errorf("a pull with --out-format: exit %d, want 0 and %q:\n%s", code, line, out)
	}
}
