//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
// in bytes: the largest of bulkmove and its waited-for children (the
// agents). It fails the test if bulkmove fails, and skips it without a
// bulkmove command.
//
// The peak comes from the bulkmove-maxrss wrapper, not from this process's
// wait4: Linux carries the parent's peak RSS over fork and exec into the
// child's (exec keeps the larger of the two), so measured from here it
// reads no lower than this test process's own peak, which earlier tests in
// the package raise.
func runMaxRSS(t *testing.T, args ...string) ([]byte, int64) {
	t.Helper()
	bin, err := exec.LookPath("bulkmove")
	if err != nil {
		t.Skip("no bulkmove command (testscript.Main provides it)")
	}
	wrap, err := exec.LookPath("bulkmove-maxrss")
	if err != nil {
		t.Skip("no bulkmove-maxrss command (testscript.Main provides it)")
	}
	at := filepath.Join(t.TempDir(), "maxrss")
	cmd := exec.Command(wrap, append([]string{bin}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "BULKMOVE_MAXRSS_FILE="+at)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bulkmove: %v\n%s", err, tail(out, 2000))
	}
	b, err := os.ReadFile(at)
	if err != nil {
		t.Fatal(err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return out, kib << 10
}

// maxRSSMain is the bulkmove-maxrss command: it runs args, and writes the
// peak RSS in KiB of it and its waited-for children to the file
// $BULKMOVE_MAXRSS_FILE. Started afresh by exec, its own small peak is all
// the child inherits (see runMaxRSS).
func maxRSSMain(args []string) int {
	c := exec.Command(args[0], args[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := c.Run()
	if c.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	kib := c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	if err := os.WriteFile(os.Getenv("BULKMOVE_MAXRSS_FILE"), []byte(strconv.FormatInt(kib, 10)+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	return c.ProcessState.ExitCode()
}

// TestDeleteFlatDirectoryBoundedMemory: --delete through an agent over a
// flat directory of 400,000 names that the destination also holds, with
// 2,000 extra files and an extra directory: the extras go, the rest stays,
// and the peak RSS of the sender and the agent stays under 64 MiB. Holding
// the whole directory (the sender its names, the agent the request, a map
// of it and its own listing) costs well over that: 87 MiB when the rest of
// the process was smaller than now. The bound leaves room for the garbage
// collector's overshoot on a loaded machine, where its marking gets less
// CPU than the allocating goroutines (48 MiB seen under CI's load, a third
// less on a quiet machine). Skipped under -short.
func TestDeleteFlatDirectoryBoundedMemory(t *testing.T) {
	t.Parallel()
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
	if rss > 64<<20 {
		t.Errorf("peak RSS %d MiB, want under 64 MiB", rss>>20)
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
