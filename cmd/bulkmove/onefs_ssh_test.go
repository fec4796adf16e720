package main

import (
	"path/filepath"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHPullOneFileSystem: -x holds on a pull as on a push: the remote
// walk does not cross into a filesystem mounted under SRC.
func TestSSHPullOneFileSystem(t *testing.T) {
	dir := shmDir(t)
	src := srcWithMount(t, dir)
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dst := filepath.Join(dir, "dst")
	if out, code := runBM(t, nil, "--ssh-config", cfg, "--journal", "none", "-x", "box2:"+src, dst); code != 0 {
		t.Fatalf("pull -x: exit %d:\n%s", code, out)
	}
	checkOneFS(t, "pull -x", dst)
}
