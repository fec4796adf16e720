package main

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/linger"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/wire"
)

// lingeringAgents returns the pids of agents lingering for dst.
func lingeringAgents(dst string) []string {
	out, _ := exec.Command("pgrep", "-f", "--", "--hub 3 --linger 1m0s -- "+dst).Output()
	return strings.Fields(string(out))
}

// waitAgents waits until lingeringAgents(dst) has n pids, and returns them.
func waitAgents(t *testing.T, dst string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := lingeringAgents(dst)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("lingering agents for %s: %v, want %d", dst, pids, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lingerRig starts the test sshd (this bulkmove on its PATH, a home of its
// own, and remoteEnv) and makes a SRC of files files: it returns the SSH
// config naming the host box2, a state directory for the sender
// (XDG_STATE_HOME), SRC and a DEST beside it.
func lingerRig(t *testing.T, files int, remoteEnv ...string) (cfg, state, src, dst string) {
	t.Helper()
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv(append([]string{"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin", "HOME=" + shmDir(t)}, remoteEnv...)...))
	dir := shmDir(t)
	src, dst = filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, files, 5); err != nil {
		t.Fatal(err)
	}
	return srv.WriteSSHConfig("box2"), t.TempDir(), src, dst
}

// TestSSHLinger: a push with --linger leaves its agent on the host; the
// next pushes (two at once among them, to other destinations) reach it
// through sshd's forwarding, with no remote shell and no new process, and
// land right; one without --linger uses it and ends it. A record whose
// agent is gone, and a hub asked with a wrong token, fail safe.
func TestSSHLinger(t *testing.T) {
	bin := testbin.Build(t)
	cfg, state, src, dst := lingerRig(t, 1500)
	env := []string{"XDG_STATE_HOME=" + state}
	t.Cleanup(func() {
		for _, p := range lingeringAgents(dst) {
			exec.Command("kill", p).Run()
		}
	})
	push := func(to string, extra ...string) string {
		t.Helper()
		out, code := runBM(t, env, append(append([]string{"--ssh-config", cfg, "-j", "3", "-v"}, extra...), src, "box2:"+to)...)
		if code != 0 {
			t.Fatalf("push %v to %s: exit %d:\n%s", extra, to, code, out)
		}
		treecmp.Equal(t, src, to, treecmp.Options{Owner: os.Geteuid() == 0})
		return out
	}

	out := push(dst, "--linger", "1m")
	if strings.Contains(out, "joined the agent lingering") {
		t.Fatalf("first push joined a lingering agent:\n%s", out)
	}
	pid := waitAgents(t, dst, 1)[0]
	recs, _ := filepath.Glob(filepath.Join(state, "bulkmove", "linger", "*.json"))
	if len(recs) != 1 {
		t.Fatalf("linger records: %v, want one", recs)
	}
	if fi, err := os.Stat(recs[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("linger record %s: %v, mode %v, want 0600", recs[0], err, fi.Mode())
	}
	rec := linger.Load(recs[0])

	// A connection with a wrong token gets no job, one that names no job
	// no stream; and neither can tell the agent is the agent.
	c, err := net.Dial("unix", rec.Sock)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if err := wire.ProveToHub(c, br, wire.HubNew, "00000000000000000000000000000000"); !errors.Is(err, wire.ErrNotAgent) {
		t.Errorf("NEW2 with a wrong token: %v, want the agent's proof found bad", err)
	}
	c.Write([]byte(wire.HubProof + strings.Repeat("0", 64) + "\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); !strings.HasPrefix(line, wire.Refused+"bad proof") {
		t.Errorf("NEW2 with a wrong token, then a bad proof: %q, %v; want refused", line, err)
	}
	c.Close()
	c, err = net.Dial("unix", rec.Sock)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := wire.ProveToHub(c, bufio.NewReader(c), wire.HubJoin, "nosuchjob"); err == nil || !strings.Contains(err.Error(), "no such job") {
		t.Errorf("JOIN2 of no job: %v, want refused", err)
	}
	c.Close()

	// Changes; the next push, and two at once elsewhere, use that agent.
	os.WriteFile(filepath.Join(src, "new.txt"), []byte("second pass"), 0o644)
	if out := push(dst, "--linger", "1m"); !strings.Contains(out, "joined the agent lingering") || !strings.Contains(out, "bulkmove: 1 files, ") {
		t.Fatalf("second push: want it to join the lingering agent and send one file:\n%s", out)
	}
	var wg sync.WaitGroup
	tos := []string{dst + "-a", dst + "-b"}
	outs, codes := make([]string, len(tos)), make([]int, len(tos))
	for i, to := range tos {
		wg.Go(func() {
			cmd := exec.Command(bin, "--ssh-config", cfg, "-j", "3", "-v", "--linger", "1m", src, "box2:"+to)
			cmd.Env = append(os.Environ(), env...)
			b, err := cmd.CombinedOutput()
			outs[i], codes[i] = string(b), cmd.ProcessState.ExitCode()
			if err != nil && codes[i] == 0 {
				codes[i] = -1
			}
		})
	}
	wg.Wait()
	for i, to := range tos {
		if codes[i] != 0 || !strings.Contains(outs[i], "joined the agent lingering") {
			t.Fatalf("push to %s at the same time: exit %d, want 0 and the lingering agent:\n%s", to, codes[i], outs[i])
		}
		treecmp.Equal(t, src, to, treecmp.Options{Owner: os.Geteuid() == 0})
	}
	if pids := waitAgents(t, dst, 1); pids[0] != pid {
		t.Fatalf("agent %s replaced by %v", pid, pids)
	}

	// Without --linger: it joins, and the agent ends with the job.
	os.WriteFile(filepath.Join(src, "new.txt"), []byte("third pass"), 0o644)
	if out := push(dst); !strings.Contains(out, "joined the agent lingering") {
		t.Fatalf("push without --linger did not use the lingering agent:\n%s", out)
	}
	waitAgents(t, dst, 0)
	if _, err := os.Stat(recs[0]); !os.IsNotExist(err) {
		t.Errorf("the record of the ended agent is still there: %v", err)
	}

	// A record whose agent is gone: a new agent starts, as without one.
	if err := linger.Save(recs[0], *rec); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "new.txt"), []byte("fourth pass"), 0o644)
	if out := push(dst); !strings.Contains(out, "no lingering agent on box2") || strings.Contains(out, "joined the agent lingering") {
		t.Fatalf("stale record: want a new agent:\n%s", out)
	}
}

// TestSSHLingerAgentKilled: a job on a lingering agent whose agent is
// killed mid-run starts a new agent as any job would (the streams redial)
// and completes.
func TestSSHLingerAgentKilled(t *testing.T) {
	bin, cfg, px := sshdBehindProxy(t)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	dir := shmDir(t)
	first, src, dst := filepath.Join(dir, "first"), filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 3000, 23); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "one"), 0o755)
	os.WriteFile(filepath.Join(dir, "one", "f"), []byte("x"), 0o644)
	args := []string{"--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "3", "--linger", "1m", "--journal", "none"}
	killAgents := func() { exec.Command("pkill", "-9", "-f", "--", "--hub 3 --linger 1m0s -- "+first).Run() }
	t.Cleanup(killAgents)
	t.Cleanup(func() { exec.Command("pkill", "-f", "--", "--hub 3 --linger 1m0s -- "+dst).Run() })
	if out, code := runBM(t, env, append(args, filepath.Join(dir, "one"), "box2:"+first)...); code != 0 {
		t.Fatalf("first push: exit %d:\n%s", code, out)
	}
	px.Slow(3 * time.Millisecond) // long enough that the kill comes mid-run
	cmd := exec.Command(bin, append(append(args, "-v", "--batch-files", "100"), src, "box2:"+dst)...)
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
	defer hung.Stop()
	waitLanded(t, dst, 100, 30*time.Second) // the job runs: the kill comes mid-run
	killAgents()
	time.Sleep(100 * time.Millisecond)
	px.Slow(0)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v, want the run to complete (killed after 90 s if it hangs):\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "joined the agent lingering") || !strings.Contains(out.String(), "reconnected") {
		t.Errorf("want the job on the lingering agent, then its streams reconnected:\n%s", out.String())
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
}
