package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneFileSystem: with -x, a filesystem mounted under SRC is moved as
// an empty directory; without it, its contents move too.
func TestOneFileSystem(t *testing.T) {
	dir := shmDir(t)
	src := srcWithMount(t, dir)
	dst := filepath.Join(dir, "dst-x")
	if out, code := runBM(t, nil, "--journal", "none", "-x", src, dst); code != 0 {
		t.Fatalf("-x: exit %d:\n%s", code, out)
	}
	checkOneFS(t, "-x", dst)
	dst2 := filepath.Join(dir, "dst")
	out, code := runBM(t, nil, "--journal", "none", src, dst2)
	if b, _ := os.ReadFile(filepath.Join(dst2, "mnt/other-fs")); code != 0 || !strings.Contains(string(b), "there") {
		t.Errorf("without -x: exit %d, the mounted filesystem's file did not move:\n%s", code, out)
	}
}

// srcWithMount makes dir/src with a file "here" and a tmpfs mounted at
// src/mnt holding "other-fs"; it skips the test where it cannot mount.
func srcWithMount(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	src := filepath.Join(dir, "src")
	mnt := filepath.Join(src, "mnt")
	os.MkdirAll(mnt, 0o755)
	os.WriteFile(filepath.Join(src, "here"), []byte("here"), 0o644)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	os.WriteFile(filepath.Join(mnt, "other-fs"), []byte("there"), 0o644)
	return src
}

// checkOneFS checks a copy of srcWithMount's SRC made with -x (what
// names the run in messages): SRC's own file, the mount point as a
// directory, nothing of the other filesystem.
func checkOneFS(t *testing.T, what, dst string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dst, "here")); err != nil {
		t.Errorf("%s: a file of SRC's own filesystem is missing", what)
	}
	if fi, err := os.Stat(filepath.Join(dst, "mnt")); err != nil || !fi.IsDir() {
		t.Errorf("%s: the mount point is not there as a directory", what)
	}
	if _, err := os.Stat(filepath.Join(dst, "mnt/other-fs")); err == nil {
		t.Errorf("%s: crossed into the other filesystem", what)
	}
}
