package viaagent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"

	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/transport/transporttest"
	"github.com/bulkmove/bulkmove/transport/viaagent"
)

// The test binary is the agent too: started with $VIAAGENT_TEST_ROOT set,
// it serves one stream on its standard input and output, as `bulkmove
// agent ROOT` does, into that root ("-other": as an agent of another
// protocol version).
func TestMain(m *testing.M) {
	if root := os.Getenv("VIAAGENT_TEST_ROOT"); root != "" {
		var err error
		if root == "-other" {
			err = transporttest.OtherProtocol(os.Stdin, os.Stdout)
		} else {
			err = receive.Serve(context.Background(), os.Stdin, os.Stdout, root, "agent")
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// agents starts test agents into root and remembers them, for the suite
// to kill or stop one.
type agents struct {
	root string
	mu   sync.Mutex
	cmds []*exec.Cmd
}

func (a *agents) command() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "VIAAGENT_TEST_ROOT="+a.root)
	cmd.Stderr = os.Stderr
	a.mu.Lock()
	a.cmds = append(a.cmds, cmd)
	a.mu.Unlock()
	return cmd
}

// signal sends sig to the first agent.
func (a *agents) signal(sig syscall.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cmds) > 0 && a.cmds[0].Process != nil {
		a.cmds[0].Process.Signal(sig)
	}
}

// TestConformance runs the transport suite against agent processes over
// pipes. Cutting a stream kills its agent; stalling it stops the agent
// (SIGSTOP), and the stall ends with the agent killed.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, env transporttest.Env) transporttest.Setup {
		a := &agents{root: env.Dst}
		other := &agents{root: "-other"}
		return transporttest.Setup{
			Transport: &viaagent.Transport{Command: a.command, Dialer: env.Dialer},
			Cut:       func() { a.signal(syscall.SIGKILL) },
			Stall: func(on bool) {
				if on {
					a.signal(syscall.SIGSTOP)
				} else {
					a.signal(syscall.SIGKILL)
				}
			},
			Refused: []transporttest.Refusal{{Name: "other protocol",
				Transport: &viaagent.Transport{Command: other.command, Dialer: env.Dialer},
				Want:      "protocol version mismatch"}},
		}
	})
}
