package engine

import (
	"os"
	"testing"
)

// shmDir is a temporary directory on a tmpfs where there is one (the
// tests make thousands of files), else the test's TempDir.
func shmDir(t *testing.T) string {
	if d, err := os.MkdirTemp("/dev/shm", "bulkmove-engine-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}
