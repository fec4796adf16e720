//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/gentree"
)

// bigTreeDir is a directory for large test trees, in /dev/shm where there
// is one, else t.TempDir(); it skips the test if the filesystem has fewer
// than inodes free.
func bigTreeDir(t *testing.T, inodes uint64) string {
	t.Helper()
	root := t.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "bulkmove-test-"); err == nil {
			root = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err == nil && sfs.Files > 0 && sfs.Ffree < inodes {
		t.Skipf("%s has %d free inodes, the trees need %d", root, sfs.Ffree, inodes)
	}
	return root
}

// runMaxRSS runs bulkmove with args, spill files in a temporary directory
// (not in the tmpfs of the trees), and returns its output and its peak RSS
// in bytes: wait4's maxrss, the largest of bulkmove and its waited-for
// children (the agents). It fails the test if bulkmove fails, and skips it
// without a bulkmove command.
func runMaxRSS(t *testing.T, args ...string) ([]byte, int64) {
	t.Helper()
	bin, err := exec.LookPath("bulkmove")
	if err != nil {
		t.Skip("no bulkmove command (testscript.Main provides it)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bulkmove: %v\n%s", err, tail(out, 2000))
	}
	return out, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
}

// TestDeleteFlatDirectoryBoundedMemory: --delete through an agent over a
// flat directory of 400,000 names that the destination also holds, with
// 2,000 extra files and an extra directory: the extras go, the rest stays,
// and the peak RSS of the sender and the agent stays under 48 MiB. Measured
// here (2 cores shared, tmpfs): 21 MiB; before a directory's names came in
// parts and spilled to disk, 87 MiB (each side held the whole directory:
// the sender its names, the agent the request, a map of it and its own
// listing). Skipped under -short.
func TestDeleteFlatDirectoryBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a flat directory of 400,000 names: skipped under -short")
	}
	const n = 400_000
	root := bigTreeDir(t, 2*n+10_000)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	start := time.Now()
	for _, d := range []string{src, dst} { // the same names, sizes and mtimes
		if err := gentree.Small(d, n, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2000 {
		if err := os.WriteFile(filepath.Join(dst, fmt.Sprintf("x%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dst, "xdir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the trees in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	_, rss := runMaxRSS(t, "--journal", "none", "--delete", "--via-agent", "-j", "2", src, dst)
	t.Logf("--delete in %s: peak RSS %d MiB (sender or agent)", time.Since(start).Round(time.Millisecond), rss>>20)
	if rss > 48<<20 {
		t.Errorf("peak RSS %d MiB, want under 48 MiB", rss>>20)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != n {
		t.Errorf("%d names at the destination, want %d", len(names), n)
	}
	for _, name := range names {
		if name[0] != 'f' {
			t.Errorf("extra %s is still there", name)
			break
		}
	}
}
