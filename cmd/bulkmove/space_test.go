package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// smallTmpfs mounts a tmpfs of size (mount's -o size) for t, in a
// directory it returns; it skips t where it cannot (not root).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	small := filepath.Join(shmDir(t), "small")
	os.MkdirAll(small, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", small).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", small).Run() })
	return small
}

// TestDiskFull: a destination that fills up stops the job (exit 3) with a
// message naming it and what is still to come; --require-space refuses
// up front; once there is room, the same command resumes and completes.
func TestDiskFull(t *testing.T) {
	small := smallTmpfs(t, "4m")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Small(src, 400, 4, 32<<10); err != nil { // 12.5 MiB
		t.Fatal(err)
	}
	dst := filepath.Join(small, "dst")
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}

	out, code := runBM(t, env, "--require-space", "-j", "2", src, dst)
	if code != exitFatal || !strings.Contains(out, "not enough space") || !strings.Contains(out, "--require-space") {
		t.Fatalf("--require-space: exit %d, want 3 and a refusal:\n%s", code, out)
	}

	// Batches of 32 files (1 MiB): the first few land before DEST fills,
	// so the rerun has acknowledged batches to resume from, whatever the
	// timing.
	out, code = runBM(t, env, "-j", "2", "--batch-files", "32", src, dst)
	if code != exitFatal || !strings.Contains(out, "no space left") || !strings.Contains(out, dst+" is full") ||
		!strings.Contains(out, "still to move") {
		t.Fatalf("disk full: exit %d, want 3 naming DEST and what is left:\n%s", code, out)
	}
	// Nothing half-written under a final name: every file there is whole.
	filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Size() != 32<<10 {
			t.Errorf("%s: %d bytes, a partial file under its final name", p, fi.Size())
		}
		return nil
	})
	if out, err := exec.Command("mount", "-o", "remount,size=64m", small).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	out, code = runBM(t, env, "-v", "-j", "2", "--batch-files", "32", src, dst)
	if code != 0 || !strings.Contains(out, "resuming: the journal") {
		t.Fatalf("after freeing space: exit %d, want 0 and a resume:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
}
