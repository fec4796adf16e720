package main

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/wire"
)

// TestAgentStopsOnSignal: an agent told to stop (SIGTERM, as an admin's
// kill or a host's shutdown sends) ends at once, though its sender keeps
// the session open and sends nothing: its stdin stream, a stream joined on
// its socket, and (with a data plane) its wait for the session's end all
// give way, it says why, and its socket is removed. It used to
// run on until the session closed.
func TestAgentStopsOnSignal(t *testing.T) {
	bin := testbin.Build(t)
	for _, mode := range []string{"ssh", "tls"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"--agent", "--hub", "2", "--", t.TempDir()}
			if mode == "tls" {
				args = []string{"--agent", "--hub", "2", "--data", "tls", "--", t.TempDir()}
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_RUNTIME_DIR=")
			stdin, err := cmd.StdinPipe() // held open, silent: a sender that went quiet
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			banner, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("banner: %v (%s)", err, stderr.String())
			}
			f := strings.Fields(banner)
			if len(f) < 3 || f[0]+" " != wire.AgentBanner {
				t.Fatalf("banner %q", banner)
			}
			sock, job := f[1], strings.TrimPrefix(f[2], "job=")
			if mode == "ssh" {
				// The second stream joins on the socket, and says nothing.
				c, err := net.Dial("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := wire.ProveToHub(c, bufio.NewReader(c), wire.HubJoin, job); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond) // served: its hello awaited
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("the agent still runs 10 s after SIGTERM (stderr: %s)", stderr.String())
			}
			if !strings.Contains(stderr.String(), "agent: stopped (terminated signal received)") {
				t.Errorf("stderr %q, want it to say the agent was stopped", stderr.String())
			}
			if _, err := os.Stat(sock); !os.IsNotExist(err) {
				t.Errorf("the agent's socket %s is left: %v", sock, err)
			}
		})
	}
}
