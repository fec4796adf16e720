package engine

import (
	"io"
	"os"
	"testing"
)

// run is the command line of the subcommands the engine holds, for the
// tests of its internals that drive a whole job (cmd/bulkmove dispatches
// the same way, with the daemons besides).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return RunVerify(args[1:], stdout, stderr)
		case "verify-summary":
			return RunVerifySummary(args[1:], stdout, stderr)
		case "plan":
			return RunPlan(args[1:], stdout, stderr)
		case "version":
			return RunVersion(args[1:], stdout, stderr)
		case "send-hub":
			return RunHub(args[1:], stdin, stdout, stderr)
		case "join", "send-join":
			return RunJoin(args[1:], stdin, stdout, stderr)
		}
	}
	return RunMove(args, stdout, stderr)
}

// shmDir is a temporary directory on a tmpfs where there is one (the
// tests make thousands of files), else the test's TempDir.
func shmDir(t *testing.T) string {
	if d, err := os.MkdirTemp("/dev/shm", "bulkmove-engine-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}
