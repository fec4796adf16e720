package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHSwappedAgentNotRun: the agent a push uploaded to
// ~/.cache/bulkmove/VERSION is replaced by another program (what sits next
// to it left alone). The next push does not run it: it finds the binary
// changed, uploads itself again and moves the files; a cache directory
// others could write to is made private again, with a warning.
func TestSSHSwappedAgentNotRun(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Mixed(src, 100, 3); err != nil {
		t.Fatal(err)
	}
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+filepath.Join(dir, "d1"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	cached := filepath.Join(home, ".cache/bulkmove", engine.Version, "bulkmove")
	marker := filepath.Join(dir, "RAN")
	os.Remove(cached)
	if err := os.WriteFile(cached, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+filepath.Join(dir, "d2"))
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the push ran the swapped agent (exit %d):\n%s", code, out)
	}
	if code != 0 || !strings.Contains(out, "uploading bulkmove") {
		t.Fatalf("exit %d, want 0 and a new upload:\n%s", code, out)
	}
	treecmp.Equal(t, src, filepath.Join(dir, "d2"), treecmp.Options{Owner: os.Geteuid() == 0})
	want, _ := os.ReadFile(bin)
	if got, _ := os.ReadFile(cached); !bytes.Equal(got, want) {
		t.Errorf("the cached agent is not this bulkmove again")
	}

	verDir := filepath.Dir(cached)
	os.Chmod(verDir, 0o775)
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+filepath.Join(dir, "d3"))
	if code != 0 || !strings.Contains(out, verDir+" was writable by group or others (mode 775): made it 0700") {
		t.Fatalf("group-writable cache: exit %d, want 0 and a warning:\n%s", code, out)
	}
	if fi, _ := os.Stat(verDir); fi.Mode().Perm() != 0o700 {
		t.Errorf("%s is %v, want 0700", verDir, fi.Mode().Perm())
	}

	// ~/.cache a symbolic link: refused, exit 3, nothing run or uploaded.
	elsewhere := shmDir(t)
	dotCache := filepath.Join(home, ".cache")
	os.Rename(dotCache, filepath.Join(elsewhere, "cache"))
	os.Symlink(filepath.Join(elsewhere, "cache"), dotCache)
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "2", src, "box2:"+filepath.Join(dir, "d4"))
	if code != exitFatal || !strings.Contains(out, dotCache+" is a symbolic link: refusing to run or keep bulkmove there") ||
		strings.Contains(out, "uploading") {
		t.Fatalf("symlinked ~/.cache: exit %d, want 3 and the refusal:\n%s", code, out)
	}
}
