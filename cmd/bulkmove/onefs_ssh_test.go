package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
)

// TestSSHPullOneFileSystem: -x holds on a pull as on a push: the remote
// walk does not cross into a filesystem mounted under SRC.
func TestSSHPullOneFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	bin := binary(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	mnt := filepath.Join(src, "mnt")
	os.MkdirAll(mnt, 0o755)
	os.WriteFile(filepath.Join(src, "here"), []byte("here"), 0o644)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	os.WriteFile(filepath.Join(mnt, "other-fs"), []byte("there"), 0o644)

	dst := filepath.Join(dir, "dst")
	if out, code := runBM(t, nil, "-F", cfg, "--journal", "none", "-x", "box2:"+src, dst); code != 0 {
		t.Fatalf("pull -x: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dst, "here")); err != nil {
		t.Errorf("pull -x: a file of SRC's own filesystem is missing")
	}
	if fi, err := os.Stat(filepath.Join(dst, "mnt")); err != nil || !fi.IsDir() {
		t.Errorf("pull -x: the mount point is not there as a directory")
	}
	if _, err := os.Stat(filepath.Join(dst, "mnt/other-fs")); err == nil {
		t.Errorf("pull -x: the remote walk crossed into the other filesystem")
	}
}
