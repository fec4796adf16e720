package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHCutover: the cutover workflow over SSH against a real sshd, the
// connections going through a fault proxy: a bulk pass; changes at the
// source; a pass cut by the network and one whose agent is killed, each
// resumed by running the same command again; a final pass with --delete;
// verify finds no difference, then finds one flipped byte.
func TestSSHCutover(t *testing.T) {
	t.Parallel()
	bin, cfg, px := sshdBehindProxy(t)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 3000, 11); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "3", "--batch-files", "100"}, extra...)
	}
	push := func(extra ...string) (string, int) { return runBM(t, env, append(args(extra...), src, "box2:"+dst)...) }
	mustVerify := func() {
		t.Helper()
		vout, vcode := runBM(t, env, append([]string{"verify"}, append(args(), src, "box2:"+dst)...)...)
		if vcode != 0 || !strings.Contains(vout, " 0 differ, 0 missing, 0 extra") {
			t.Fatalf("verify: exit %d, want 0 and no difference:\n%s", vcode, vout)
		}
	}

	if out, code := push(); code != 0 {
		t.Fatalf("bulk pass: exit %d:\n%s", code, out)
	}

	// The service goes on: changes, additions, a deletion.
	os.WriteFile(filepath.Join(src, "changed.txt"), []byte("new content"), 0o644)
	os.Remove(filepath.Join(src, "a.txt"))
	os.WriteFile(filepath.Join(dst, "a.txt"), []byte("stale"), 0o644)
	if err := gentree.Mixed(filepath.Join(src, "more"), 2000, 12); err != nil {
		t.Fatal(err)
	}

	// The network cuts every connection after 2 MB and the streams do not
	// reconnect: the pass fails, and the same command resumes it.
	px.CutAfter(2 << 20)
	out, code := push("--reconnect-timeout", "0")
	if code != exitFatal || px.Cuts.Load() == 0 {
		t.Fatalf("cut pass: exit %d with %d cuts, want 3 and cuts:\n%s", code, px.Cuts.Load(), out)
	}
	px.CutAfter(0)
	out, code = push("-v")
	if code != 0 || !strings.Contains(out, "resuming: the journal") {
		t.Fatalf("resumed pass: exit %d, want 0 and a resume from the journal:\n%s", code, out)
	}

	// More to move, and the agent killed mid-pass.
	if err := gentree.Mixed(filepath.Join(src, "more2"), 2000, 13); err != nil {
		t.Fatal(err)
	}
	px.Slow(5 * time.Millisecond) // long enough that the kill comes mid-pass
	cmd := exec.Command(bin, append(args("--reconnect-timeout", "0"), src, "box2:"+dst)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the journal holds a batch or more (on a busy machine a fixed
	// sleep could come before the first acknowledgement).
	journaled := func() bool {
		ms, _ := filepath.Glob(filepath.Join(env[0][len("XDG_STATE_HOME="):], "bulkmove", "journal", "*.journal"))
		for _, m := range ms {
			if fi, err := os.Stat(m); err == nil && fi.Size() > 2048 {
				return true
			}
		}
		return false
	}
	for start := time.Now(); !journaled() && time.Since(start) < 20*time.Second; {
		time.Sleep(20 * time.Millisecond)
	}
	exec.Command("pkill", "-9", "-f", "--", "--hub 3 -- "+dst).Run()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFatal {
		t.Fatalf("agent killed: %v, want exit 3:\n%s", err, stderr.String())
	}
	px.Slow(0)
	if out, code := push("-v"); code != 0 || !strings.Contains(out, "resuming: the journal") {
		t.Fatalf("pass after the agent was killed: exit %d, want 0 and a resume:\n%s", code, out)
	}

	// The final pass deletes; verify proves the copy.
	if out, code := push("--delete"); code != 0 || !strings.Contains(out, "; 1 deleted; 0 errors") {
		t.Fatalf("--delete pass: exit %d, want 0 and 1 deleted:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
	mustVerify()

	// A flipped byte, same size and mtime.
	p := filepath.Join(dst, "changed.txt")
	fi, _ := os.Stat(p)
	os.WriteFile(p, []byte("new cOntent"), 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	vout, vcode := runBM(t, env, append([]string{"verify"}, append(args(), src, "box2:"+dst)...)...)
	if vcode != exitPartial || !strings.Contains(vout, "differ changed.txt: content: differs") {
		t.Fatalf("verify after corruption: exit %d, want 2 naming changed.txt:\n%s", vcode, vout)
	}
}

// TestSSHReconnect: connections cut mid-transfer, and then the agent
// killed: the lost streams give their batches back, reconnect (to the
// agent hub, or to a new one), and the same run completes.
func TestSSHReconnect(t *testing.T) {
	t.Parallel()
	bin, cfg, px := sshdBehindProxy(t)
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 3000, 21); err != nil {
		t.Fatal(err)
	}
	for _, fault := range []struct {
		name   string
		inject func()
	}{
		{"cut", func() { px.CutAll() }},
		{"reset", func() { px.Reset(true); px.CutAll(); px.Reset(false) }},
		{"agent killed", func() { exec.Command("pkill", "-9", "-f", "--", "--hub 3 -- "+dst).Run() }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			os.RemoveAll(dst)
			px.Slow(3 * time.Millisecond) // long enough that the fault comes mid-run
			cmd := exec.Command(bin, "--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "3", "--batch-files", "100", "--journal", "none", src, "box2:"+dst)
			var out strings.Builder
			cmd.Stderr = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The fault is for the data flowing, not for the start (a
			// loaded machine can take longer than any fixed wait to
			// reach the first file): wait for files to land first.
			waitLanded(t, dst, 50, 20*time.Second)
			fault.inject()
			time.Sleep(100 * time.Millisecond)
			px.Slow(0)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%v, want the run to complete:\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "reconnected") {
				t.Errorf("no stream reconnected (was the fault injected before the end?):\n%s", out.String())
			}
			treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
		})
	}
}

// sshdBehindProxy starts a real sshd (with this bulkmove on its PATH) and
// a fault proxy in front of it, and returns the binary, an ssh_config for
// "box2" and the proxy; reach sshd through it with -p px.Port().
func sshdBehindProxy(t *testing.T) (bin, cfg string, px *faultproxy.Proxy) {
	t.Helper()
	bin = testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg = srv.WriteSSHConfig("box2")
	px, err := faultproxy.Start(fmt.Sprintf("%s:%d", srv.Host, srv.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	srv.TrustPort(t, px.Port()) // another known_hosts name for the same host key
	return bin, cfg, px
}

// waitLanded waits until the tree dir holds at least n regular files, or
// fails the test after limit.
func waitLanded(t *testing.T, dir string, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		got := 0
		filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				got++
			}
			return nil
		})
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d files landed in %s within %v", n, dir, limit)
}

// agentsOf returns the process ids of the agents running for DEST dst on
// this machine (the test's sshd starts them here): `bulkmove agent ...
// -- dst`.
func agentsOf(dst string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) > 2 && args[1] == "--agent" && args[len(args)-1] == dst {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitAgentsGone waits until no agent for dst runs, or fails the test
// after limit.
func waitAgentsGone(t *testing.T, dst string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		pids := agentsOf(dst)
		if len(pids) == 0 {
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("the agents %v for %s still run %v after their sender ended", pids, dst, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
