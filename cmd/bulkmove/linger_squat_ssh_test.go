package main

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/linger"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// lingerAttacker returns the credentials of a second local user, the
// attacker, made for the test (as root) if missing.
func lingerAttacker(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attacker is a second local user: run as root to create one")
	}
	const name = "bmattklinger"
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// agentsFor returns the pids of agents serving dst that linger for d.
func agentsFor(dst, d string) []string {
	out, _ := exec.Command("pgrep", "-f", "--", "--hub 3 --linger "+d+" -- "+dst).Output()
	return strings.Fields(string(out))
}

// TestSSHLingerSquatted is the attack on a lingering agent's socket: the
// agent a push left has ended (its time ran out; then the remote host
// "reboots", emptying its runtime directory), and another user on the
// remote host makes the socket's path again and listens there, answering
// as an agent would, with a banner that names a program of its choosing.
// The next push must not use it: it sends the squatter no token, no job
// request and no file data, runs nothing it names (the program would make
// a marker file), and lands the files through a new agent of its own.
func TestSSHLingerSquatted(t *testing.T) {
	attacker := lingerAttacker(t)
	// The remote host's runtime directory (as /run/user/UID): a private
	// directory in a sticky one that everyone can write, as /tmp.
	shared := shmDir(t)
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	runtime := filepath.Join(shared, "run")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, state, src, dst := lingerRig(t, 200, "XDG_RUNTIME_DIR="+runtime)
	env := []string{"XDG_STATE_HOME=" + state}
	const secret = "the file data only the agent may see 8f3c1e"
	t.Cleanup(func() {
		for _, p := range append(agentsFor(dst, "1s"), agentsFor(dst, "1m0s")...) {
			exec.Command("kill", p).Run()
		}
	})

	// The attacker's program: built where the attacker can run it, and
	// the program its banner names, which would leave a marker.
	tools := shmDir(t)
	os.Chmod(tools, 0o755)
	squatter := filepath.Join(tools, "squatter")
	if out, err := exec.Command("go", "build", "-o", squatter, "./testdata/squatter").CombinedOutput(); err != nil {
		t.Fatalf("building the squatter: %v\n%s", err, out)
	}
	marker := filepath.Join(tools, "pwned")
	evil := filepath.Join(tools, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	// A push leaves its agent lingering for a second; the agent ends.
	if out, code := runBM(t, env, "--ssh-config", cfg, "-j", "3", "-v", "--linger", "1s", src, "box2:"+dst); code != 0 {
		t.Fatalf("first push: exit %d:\n%s", code, out)
	}
	recs, _ := filepath.Glob(filepath.Join(state, "bulkmove", "linger", "*.json"))
	if len(recs) != 1 {
		t.Fatalf("linger records: %v, want one", recs)
	}
	rec := linger.Load(recs[0])
	if rec == nil {
		t.Fatalf("linger record %s unreadable", recs[0])
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(agentsFor(dst, "1s")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lingering agent did not end within 15 s of a 1 s linger")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The host reboots: its runtime directory is emptied.
	if err := os.RemoveAll(runtime); err != nil {
		t.Fatal(err)
	}

	// The attacker makes the socket's path again, as itself.
	var got bytes.Buffer
	cmd := exec.Command(squatter, rec.Sock, evil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: attacker}
	cmd.Stdout = &got
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	defer stop()
	for {
		if _, err := os.Stat(rec.Sock); err == nil {
			break
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			stop()
			t.Fatalf("the attacker could not make %s: %s", rec.Sock, errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The next push, with a secret in a file.
	if err := os.WriteFile(filepath.Join(src, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, env, "--ssh-config", cfg, "-j", "3", "-v", "--linger", "1s", src, "box2:"+dst)
	time.Sleep(500 * time.Millisecond) // what the push sent has reached the squatter
	stop()
	received := got.String()
	t.Logf("the squatter received %q", received)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the program the squatter's banner named was run (%s exists)", marker)
	}
	for what, s := range map[string]string{"the linger token": rec.Token, "the job request": dst, "file data": secret} {
		if strings.Contains(received, s) {
			t.Errorf("the squatter received %s", what)
		}
	}
	if code != 0 {
		t.Fatalf("push with the socket squatted: exit %d, want 0 (a new agent):\n%s", code, out)
	}
	if strings.Contains(out, "joined the agent lingering") {
		t.Errorf("the push took the squatter for its agent:\n%s", out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
}

// TestSSHLingerTokenRotates: each job on a lingering agent gets the next
// token, saved in place of the one it used, which the agent then refuses:
// a push that presents it (a copy of the record, kept from before) finds
// no lingering agent and starts one of its own.
func TestSSHLingerTokenRotates(t *testing.T) {
	cfg, state, src, dst := lingerRig(t, 200)
	env := []string{"XDG_STATE_HOME=" + state}
	t.Cleanup(func() {
		for _, p := range agentsFor(dst, "1m0s") {
			exec.Command("kill", p).Run()
		}
	})
	push := func() string {
		t.Helper()
		out, code := runBM(t, env, "--ssh-config", cfg, "-j", "3", "-v", "--linger", "1m", src, "box2:"+dst)
		if code != 0 {
			t.Fatalf("push: exit %d:\n%s", code, out)
		}
		return out
	}
	push()
	recs, _ := filepath.Glob(filepath.Join(state, "bulkmove", "linger", "*.json"))
	if len(recs) != 1 {
		t.Fatalf("linger records: %v, want one", recs)
	}
	old := linger.Load(recs[0])
	if out := push(); !strings.Contains(out, "joined the agent lingering") {
		t.Fatalf("second push: want it on the lingering agent:\n%s", out)
	}
	next := linger.Load(recs[0])
	if next == nil || next.Token == old.Token {
		t.Fatalf("the linger token after a job: %+v, want a new one (the one used was %s)", next, old.Token)
	}
	// The used token, presented again, is refused.
	if err := linger.Save(recs[0], *old); err != nil {
		t.Fatal(err)
	}
	if out := push(); strings.Contains(out, "joined the agent lingering") || !strings.Contains(out, "no lingering agent on box2") {
		t.Fatalf("a push with the used token: want it refused, and a new agent:\n%s", out)
	}
	if n := len(agentsFor(dst, "1m0s")); n != 2 {
		t.Errorf("%d agents lingering, want 2 (the first one, and the one the refused push started)", n)
	}
}
