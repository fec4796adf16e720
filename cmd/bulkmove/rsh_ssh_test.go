//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/transport/transporttest"
)

// rshServer is a test sshd whose logins find this tree's bulkmove on
// their PATH, and an ssh_config reaching it as box2 with extra lines.
func rshServer(t *testing.T, opts ...sshdtest.Option) *sshdtest.Server {
	t.Helper()
	for _, p := range []string{"ssh"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("no %s (apt-get install openssh-client)", p)
		}
	}
	bin := testbin.Build(t)
	return sshdtest.Start(t, append(opts, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))...)
}

// logins counts the logins sshd accepted.
func logins(srv *sshdtest.Server) int {
	return strings.Count(srv.Log(), "Accepted publickey")
}

// TestRsh: `-e "ssh -F CONFIG"` moves the tree with every kind of entry
// (the transports' conformance tree) exactly, pushed and pulled, each of
// the 3 streams its own ssh process and login; and with --transport tls,
// ssh only starts the agent (one login). A COMMAND that does not exist is
// a usage error naming it.
func TestRsh(t *testing.T) {
	t.Parallel()
	srv := rshServer(t)
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := transporttest.Tree(src); err != nil {
		t.Fatal(err)
	}
	rsh := "ssh -F " + cfg
	// The tree's 3.8 MiB paced at 2 MiB/s: the streams that join after
	// the first (each an ssh process logging in) are there before the
	// last batch leaves, on a fast machine too, where the first stream
	// alone could otherwise carry the tree and the others end unused.
	for _, c := range []struct {
		name   string
		args   []string
		dst    string
		logins int
	}{
		{"push", []string{"-j", "3", "--bwlimit", "2M", src, "box2:" + filepath.Join(dir, "push")}, "push", 3},
		{"pull", []string{"-j", "3", "--bwlimit", "2M", "box2:" + src, filepath.Join(dir, "pull")}, "pull", 3},
		{"push tls", []string{"-j", "3", "--transport", "tls", src, "box2:" + filepath.Join(dir, "tls")}, "tls", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := logins(srv)
			out, code := runBM(t, nil, append([]string{"-e", rsh}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			treecmp.Equal(t, src, filepath.Join(dir, c.dst), treecmp.Options{Owner: true})
			if n := logins(srv) - before; n < c.logins {
				t.Errorf("sshd saw %d logins, want at least %d (one ssh per stream)", n, c.logins)
			}
		})
	}
	t.Run("no such command", func(t *testing.T) {
		out, code := runBM(t, nil, "-e", "no-such-ssh -q", src, "box2:"+filepath.Join(dir, "x"))
		if code != exitUsage || !strings.Contains(out, "no-such-ssh") {
			t.Fatalf("exit %d, want %d naming the command:\n%s", code, exitUsage, out)
		}
	})
}

// TestRshControlMaster: the user's ssh_config applies as it does for ssh:
// with a ControlMaster there, the 3 streams' ssh processes share its one
// login.
func TestRshControlMaster(t *testing.T) {
	t.Parallel()
	srv := rshServer(t)
	ctl := filepath.Join(t.TempDir(), "cm-%C")
	cfg := srv.WriteSSHConfig("box2", "  ControlMaster auto", "  ControlPath "+ctl, "  ControlPersist 60")
	t.Cleanup(func() { exec.Command("ssh", "-F", cfg, "-O", "exit", "box2").Run() })
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := transporttest.Tree(src); err != nil {
		t.Fatal(err)
	}
	before := logins(srv)
	if out, code := runBM(t, nil, "-e", "ssh -F "+cfg, "-j", "3", src, "box2:"+filepath.Join(dir, "dst")); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, filepath.Join(dir, "dst"), treecmp.Options{Owner: true})
	if n := logins(srv) - before; n != 1 {
		t.Errorf("sshd saw %d logins, want 1 (the ControlMaster's)", n)
	}
	if out, err := exec.Command("ssh", "-F", cfg, "-O", "check", "box2").CombinedOutput(); err != nil {
		t.Errorf("no master running after the job (ControlPersist): %v %s", err, out)
	}
}

// TestRshPassphraseOnce: with a key whose passphrase only the user knows
// (no ssh-agent), `-e ssh -j 4` asks for it at the terminal once for the
// job, not once per ssh process: a mistyped one is asked again, then the
// 4 processes log in with the one typed, each its own login.
func TestRshPassphraseOnce(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	key := filepath.Join(t.TempDir(), "id_locked")
	sshdtest.WriteKey(t, key, "open sesame")
	srv := rshServer(t, sshdtest.WithUserKey(key))
	cfg := srv.WriteSSHConfig("box2", "  IdentitiesOnly yes", "  IdentityAgent none")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := transporttest.Tree(src); err != nil {
		t.Fatal(err)
	}
	// Enough, slowed by --bwlimit, for every stream to join before the
	// end: each ssh decrypts the key (bcrypt), which takes a while on a
	// busy machine.
	for i := range 64 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("big%02d", i)), make([]byte, 256<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(dir, "dst")
	sock := filepath.Join(dir, "tmux")
	tmux := tmuxServer(t, sock)
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	script := fmt.Sprintf("unset SSH_AUTH_SOCK; %s -e 'ssh -F %s' -j 4 --bwlimit 2M %s box2:%s; echo EXIT=$?; sleep 60",
		testbin.Build(t), cfg, src, dst)
	tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "bm", "sh", "-c", script)
	screen := func() string { return tmux("capture-pane", "-p", "-J", "-t", "bm", "-S", "-") }
	waitFor := func(what func(string) bool, why string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := screen()
			if what(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s; the terminal shows:\n%s", why, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	prompts := func(s string) int { return strings.Count(s, "Enter passphrase for key") }
	waitFor(func(s string) bool { return prompts(s) == 1 }, "no passphrase prompt")
	tmux("send-keys", "-t", "bm", "wrong guess", "Enter")
	waitFor(func(s string) bool { return prompts(s) == 2 }, "a wrong passphrase was not asked again")
	tmux("send-keys", "-t", "bm", "open sesame", "Enter")
	s := waitFor(func(s string) bool { return strings.Contains(s, "EXIT=") }, "the job did not end")
	if !strings.Contains(s, "EXIT=0") {
		t.Fatalf("the job failed:\n%s", s)
	}
	if n := prompts(s); n != 2 {
		t.Errorf("asked %d times, want 2 (the wrong one, then once for the 4 processes):\n%s", n, s)
	}
	if strings.Contains(s, "open sesame") || strings.Contains(s, "wrong guess") {
		t.Errorf("the passphrase was echoed:\n%s", s)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
	if n := logins(srv); n < 4 {
		t.Errorf("sshd saw %d logins, want 4 (one per stream)", n)
	}
}
