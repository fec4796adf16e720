package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

func shmDir(t *testing.T) string {
	if d, err := os.MkdirTemp("/dev/shm", "bulkmove-ssh-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

// runBM runs the built bulkmove and returns its combined output and exit code.
func runBM(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testbin.Build(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), exitOf(t, err)
}

// runPushPull runs bulkmove with args and extra over SSH: a push of
// src's contents to box2:dst, or with pull a pull of box2:src's into dst.
func runPushPull(t *testing.T, env []string, args []string, pull bool, src, dst string, extra ...string) (string, int) {
	t.Helper()
	a := append(slices.Clip(args), extra...)
	if pull {
		return runBM(t, env, append(a, "box2:"+src+"/", dst)...)
	}
	return runBM(t, env, append(a, src+"/", "box2:"+dst)...)
}

// exitOf is the exit code of a command that ran with err.
func exitOf(t *testing.T, err error) int {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestSSHPush: bulkmove -j 3 SRC box2:DEST against a real sshd, with
// bulkmove on the remote PATH; then a second run sends nothing.
func TestSSHPush(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 2000, 3); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "3", src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "3", src, "box2:"+dst)
	if code != 0 || !strings.Contains(out, "0 files, 0 B") {
		t.Fatalf("second run, exit %d, want nothing sent:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache/bulkmove")); err == nil {
		t.Errorf("uploaded although bulkmove was on the remote PATH")
	}
	// A remote entry that cannot be written: named with the host, the
	// destination and the cause; the rest moves; exit 2.
	os.WriteFile(filepath.Join(src, "blocked"), []byte("new"), 0o644)
	os.WriteFile(filepath.Join(src, "fine"), []byte("new"), 0o644)
	os.MkdirAll(filepath.Join(dst, "blocked", "sub"), 0o755)
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "3", src, "box2:"+dst)
	if code != exitPartial || !strings.Contains(out, "box2:"+dst+": ") || !strings.Contains(out, "blocked: a non-empty directory is in the way of a file; rerun with --delete to replace it") {
		t.Fatalf("exit %d, want 2 and the remote error:\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "fine")); string(b) != "new" {
		t.Errorf("the other file did not move")
	}
	// One stream: the hub serves just the first connection.
	os.WriteFile(filepath.Join(src, "one"), []byte("1"), 0o644)
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "1", src, "box2:"+dst)
	if code != exitPartial || !strings.Contains(out, "bulkmove: 1 files, ") {
		t.Fatalf("-j 1: exit %d, want 2 (blocked is still in the way) and the one new file:\n%s", code, out)
	}
	// --delete over SSH: what SRC lacks goes, in parallel over the streams.
	os.Remove(filepath.Join(src, "blocked"))
	os.RemoveAll(filepath.Join(dst, "blocked"))
	os.WriteFile(filepath.Join(dst, "stray"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(dst, "straydir", "sub"), 0o755)
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "3", "--delete", src, "box2:"+dst)
	if code != 0 || !strings.Contains(out, "; 3 deleted; 0 errors") {
		t.Fatalf("--delete: exit %d, want 0 and 3 deleted (stray, straydir and what it held):\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
}

// TestSSHPushRelayed: where sshd does not forward to Unix sockets
// (AllowStreamLocalForwarding no), the streams after the first reach the
// agent through a `bulkmove --join` process instead, and the job completes;
// a pull's streams reach the remote sender's socket the same way.
func TestSSHPushRelayed(t *testing.T) {
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home),
		sshdtest.WithConfig("AllowStreamLocalForwarding no"))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 1000, 5); err != nil {
		t.Fatal(err)
	}
	// Paced (20 MiB at 8 MiB/s), so that the streams after the first have
	// joined before the last batch leaves, on a fast machine too.
	out, code := runBM(t, nil, "-v", "--ssh-config", cfg, "-j", "3", "--bwlimit", "8M", src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if n := strings.Count(out, "relayed by `bulkmove --join`"); n != 2 {
		t.Errorf("%d streams relayed, want 2:\n%s", n, out)
	}
	if n := len(regexp.MustCompile(`(?m) stream [0-9]+ ready$`).FindAllString(out, -1)); n != 3 {
		t.Errorf("%d streams connected, want 3:\n%s", n, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	// A pull: its streams join the remote sender's socket relayed too.
	back := filepath.Join(dir, "back")
	if out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "3", "box2:"+dst, back); code != 0 || strings.Contains(out, "warning") {
		t.Fatalf("pull: exit %d, want 0 and no warning:\n%s", code, out)
	}
	treecmp.Equal(t, src, back, treecmp.Options{Owner: os.Geteuid() == 0})
}

// TestSSHUploadsAgent: no bulkmove on the remote PATH: this binary is
// uploaded to ~/.cache/bulkmove/VERSION/ and reused by the next run.
func TestSSHUploadsAgent(t *testing.T) {
	testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Mixed(src, 300, 4); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+filepath.Join(dir, "d1"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	cached := filepath.Join(home, ".cache/bulkmove", engine.Version, "bulkmove")
	fi1, err := os.Stat(cached)
	if err != nil {
		t.Fatalf("agent not uploaded to %s: %v\n%s", cached, err, out)
	}
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+filepath.Join(dir, "d2"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	fi2, err := os.Stat(cached)
	if err != nil || !os.SameFile(fi1, fi2) {
		t.Errorf("the second run replaced the cached agent")
	}
	treecmp.Equal(t, src, filepath.Join(dir, "d2"), treecmp.Options{Owner: os.Geteuid() == 0})
}

// TestSSHUnknownHost: a host missing from known_hosts is refused with a hint,
// exit 3; --accept-new-host-key records it and goes on.
func TestSSHUnknownHost(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin"))
	dir := shmDir(t)
	kh := filepath.Join(dir, "known_hosts") // empty: box2 is unknown
	cfg := filepath.Join(dir, "config")
	cfgText := "Host box2\n  HostName 127.0.0.1\n  Port " + strconv.Itoa(srv.Port) + "\n  User " + srv.User +
		"\n  IdentityFile " + srv.UserKey + "\n  UserKnownHostsFile " + kh + "\n"
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src/f"), []byte("x"), 0o644)
	out, code := runBM(t, nil, "--ssh-config", cfg, filepath.Join(dir, "src"), "box2:"+filepath.Join(dir, "dst"))
	if code != exitFatal || !strings.Contains(out, "--accept-new-host-key") {
		t.Fatalf("exit %d, want 3 and a hint:\n%s", code, out)
	}
	out, code = runBM(t, nil, "--ssh-config", cfg, "--accept-new-host-key", filepath.Join(dir, "src"), "box2:"+filepath.Join(dir, "dst"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dst/f")); string(b) != "x" {
		t.Errorf("file not moved")
	}
}

// TestSSHOneConnectionRefused: one of K connections is dropped by a proxy;
// the job completes on the others, with a warning.
func TestSSHOneConnectionRefused(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n.Add(1) == 2 { // drop the second connection
				c.Close()
				continue
			}
			go func() {
				s, err := net.Dial("tcp", srv.Addr)
				if err != nil {
					c.Close()
					return
				}
				go func() { io.Copy(s, c); s.Close() }()
				io.Copy(c, s)
				c.Close()
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dir := shmDir(t)
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, []byte("[127.0.0.1]:"+strconv.Itoa(port)+" "+srv.HostKeyLine+"\n"), 0o600)
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte("Host box2\n  HostName 127.0.0.1\n  Port "+strconv.Itoa(port)+"\n  User "+srv.User+
		"\n  IdentityFile "+srv.UserKey+"\n  UserKnownHostsFile "+kh+"\n"), 0o600)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 500, 5); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "4", src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "going on with 3 of 4 streams") {
		t.Errorf("no warning about the lost stream:\n%s", out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
}

// TestSSHPull: bulkmove -j 3 box2:SRC DEST receives the remote tree over
// three connections; a second run sends nothing; a single remote file lands
// as DEST.
func TestSSHPull(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 2000, 6); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "3", "box2:"+src, dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "3", "box2:"+src, dst)
	if code != 0 || !strings.Contains(out, "0 files, 0 B") {
		t.Fatalf("second run, exit %d, want nothing sent:\n%s", code, out)
	}
	os.WriteFile(filepath.Join(dir, "one"), []byte("one file"), 0o644)
	out, code = runBM(t, nil, "--ssh-config", cfg, "box2:"+filepath.Join(dir, "one"), filepath.Join(dir, "copy"))
	if b, _ := os.ReadFile(filepath.Join(dir, "copy")); code != 0 || string(b) != "one file" {
		t.Fatalf("single file pull, exit %d, got %q:\n%s", code, b, out)
	}
	// A remote SRC that does not exist: the remote's error, exit 3.
	out, code = runBM(t, nil, "--ssh-config", cfg, "box2:"+filepath.Join(dir, "nosuch"), filepath.Join(dir, "x"))
	if code != exitFatal || !strings.Contains(out, "no such file") {
		t.Fatalf("missing remote source, exit %d:\n%s", code, out)
	}
}

// TestSSHChattyLoginShell: a remote ~/.bashrc that prints a banner on
// stdout (as some servers do) does not break the job: the banner is
// skipped, with a warning that quotes it.
func TestSSHChattyLoginShell(t *testing.T) {
	bin := testbin.Build(t)
	home := shmDir(t)
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("echo 'Welcome to box2!'\necho 'Authorized use only.'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	if out, err := exec.Command("ssh", "--ssh-config", cfg, "box2", "true").CombinedOutput(); err != nil || !strings.Contains(string(out), "Welcome") {
		t.Skipf("the remote login shell does not read ~/.bashrc here (%v: %s)", err, out)
	}
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 500, 8); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+dst)
	if code != 0 || !strings.Contains(out, "Welcome to box2!") {
		t.Fatalf("exit %d, want 0 and a warning quoting the banner:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
}

// TestSSHDataPlane: --transport tls and tcp: SSH starts the agent, the
// streams go straight to it (TLS 1.3 pinned to the agent's throwaway
// certificate, or plain TCP), each with the one-time token.
func TestSSHDataPlane(t *testing.T) {
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Mixed(src, 1500, 9); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"tls", "tcp", "auto", "tcp-sendfile", "tls-addr"} {
		t.Run(tr, func(t *testing.T) {
			dst := filepath.Join(dir, "dst-"+tr)
			mode := strings.TrimSuffix(strings.TrimSuffix(tr, "-sendfile"), "-addr")
			args := []string{"-v", "--ssh-config", cfg, "-j", "3", "--transport", mode, "--data-ports", "40000-40100", src, "box2:" + dst}
			switch tr {
			case "tcp-sendfile":
				// No hashes to make: the larger bodies go by sendfile.
				args = append([]string{"--no-verify-transfer"}, args...)
			case "tls-addr":
				// The data plane on an address asked for, the streams to it.
				args = append([]string{"--data-addr", "127.0.0.1"}, args...)
			}
			out, code := runBM(t, nil, args...)
			if code != 0 || !strings.Contains(out, "1 SSH connections open") || !strings.Contains(out, "connected 3 streams") {
				t.Fatalf("exit %d, want 0 over one SSH connection and 3 data streams:\n%s", code, out)
			}
			if tr == "auto" {
				mode = "tls"
			}
			if !strings.Contains(out, "stream 2 ("+mode+") ready") {
				t.Errorf("no %s stream:\n%s", mode, out)
			}
			if sent := strings.Contains(out, "by sendfile)"); sent != (tr == "tcp-sendfile") {
				t.Errorf("bodies by sendfile: %v, want %v:\n%s", sent, !sent, out)
			}
			treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
		})
	}
}

// TestSSHRemoteBulkmove: --remote-bulkmove PATH starts that binary as the
// agent (at once, with no search first); a PATH that does not run there
// fails the job naming it, and moves nothing.
func TestSSHRemoteBulkmove(t *testing.T) {
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 300, 5); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "-v", "--ssh-config", cfg, "-j", "2", "--remote-bulkmove", bin, src, "box2:"+dst)
	if code != 0 || !strings.Contains(out, "agent "+bin+" ready on box2") {
		t.Fatalf("exit %d, want 0 and the named agent:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	if _, err := os.Stat(filepath.Join(home, ".cache/bulkmove")); err == nil {
		t.Errorf("uploaded although --remote-bulkmove named a binary")
	}
	missing := filepath.Join(dir, "no-such-bulkmove")
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", "--remote-bulkmove", missing, src, "box2:"+filepath.Join(dir, "dst2"))
	if code == 0 || !strings.Contains(out, missing) {
		t.Fatalf("exit %d, want a failure naming %s:\n%s", code, missing, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "dst2")); err == nil {
		if es, _ := os.ReadDir(filepath.Join(dir, "dst2")); len(es) > 0 {
			t.Errorf("files moved without an agent: %d entries", len(es))
		}
	}
}
