package agentd

import (
	"context"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The agent's stdin and stdout, pipes from sshd, hold 1 MiB each: with
// the 64 KiB a pipe starts with, sshd keeps what the sender sent in its
// own buffer, at a cost in CPU larger than the receiving's.
func TestRunGrowsPipes(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	defer outW.Close()
	inW.Close() // the sender is gone at once: Run returns
	Run(context.Background(), Config{Root: t.TempDir()}, inR, outW)
	for name, f := range map[string]*os.File{"stdin": inR, "stdout": outW} {
		n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n < pipeSize {
			t.Errorf("the agent's %s is a pipe of %d bytes, want %d", name, n, pipeSize)
		}
	}
}
