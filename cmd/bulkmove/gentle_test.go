//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/ionice"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// ioClassNice returns the I/O class and the nice value of process pid
// (its main thread).
func ioClassNice(pid int) (class, nice int, err error) {
	prio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, uintptr(pid), 0)
	if errno != 0 {
		return 0, 0, errno
	}
	p, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	return int(prio>>13) & 7, 20 - p, err
}

// waitGentle waits up to 5 s for process pid to be in the idle I/O class
// at nice 19.
func waitGentle(t *testing.T, what string, pid int) {
	t.Helper()
	var class, nice int
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if class, nice, err = ioClassNice(pid); err == nil && class == ionice.ClassIdle && nice == 19 {
			return
		}
	}
	t.Errorf("%s (pid %d): I/O class %d, nice %d (%v); want idle (%d), 19", what, pid, class, nice, err, ionice.ClassIdle)
}

// children lists the processes pid started.
func children(pid int) []int {
	var kids []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids
}

// TestIONice: --io-nice and --nice 19 put the sender in the idle I/O class
// at nice 19, and it passes both to its agents; an agent given them
// (as over SSH, where it inherits nothing) takes them itself.
func TestIONice(t *testing.T) {
	bin := testbin.Build(t)
	dir := shmDir(t)

	// The agent alone: it sets them before it reads a byte.
	agent := exec.Command(bin, "--agent", "--io-nice", "--nice", "19", filepath.Join(dir, "agent-dst"))
	stdin, err := agent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	waitGentle(t, "agent --io-nice --nice 19", agent.Process.Pid)
	stdin.Close()
	agent.Wait()

	// The sender, paced to last about 4 s, and its agents. Each agent's
	// command line is read as soon as it shows (a test machine under load
	// may find one late, or after it has exited: then it is read as empty).
	src := randomTree(t, dir, 4, 1<<20)
	cmd := exec.Command(bin, "--journal", "none", "--via-agent", "-j", "2", "--batch-files", "1", "--io-nice", "--nice", "19", "--bwlimit", "1M", src, filepath.Join(dir, "dst"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waitGentle(t, "sender", pid)
	agents := map[int]string{}
	for deadline := time.Now().Add(10 * time.Second); len(agents) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, k := range children(pid) {
			if _, seen := agents[k]; seen {
				continue
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline")
			if err != nil || len(b) == 0 {
				continue // gone already
			}
			args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
			if strings.Join(args, " ") == strings.Join(cmd.Args, " ") {
				continue // forked, not yet the agent
			}
			agents[k] = strings.Join(args[1:], " ")
			if strings.HasPrefix(agents[k], "--agent ") {
				waitGentle(t, "agent of the sender", k)
			}
		}
	}
	if len(agents) < 2 {
		t.Errorf("the sender started %d agents, want 2", len(agents))
	}
	for _, got := range agents {
		// The --allow-* flags are the receiver's policy (see policy.go).
		if !regexp.MustCompile(`^--agent --io-nice --nice 19 (--allow-\S+ )*-- `).MatchString(got) {
			t.Errorf("agent started as %q, want --agent --io-nice --nice 19 [--allow-...] -- DEST", got)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
