//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHFakeSuper: --fake-super over SSH, each end told by the other:
// a push with -M--fake-super has the agent keep owners, setuid bits and
// devices in user.rsync.%stat; a pull with -M--fake-super has the remote
// sender read them, and the tree comes back as it was; a pull with
// --fake-super has this host's receiver write them, the same as the
// agent did. (fakesuper.txtar runs the ends as nobody, locally, and
// against rsync.)
func TestSSHFakeSuper(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("owners and devices need root")
	}
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	sh(t, src, "mkdir -p sub tmp && echo data > f && chown 1234:5678 f && echo s > suid && chmod 4755 suid && "+
		"chmod 2755 sub && chmod 1777 tmp && mknod sub/null c 1 3 && chmod 666 sub/null && mkfifo sub/pipe && "+
		"ln -s f lnk && chown -h 3:4 lnk && ln f hl")
	ssh := []string{"--ssh-config", cfg, "-j", "2", "-D", "--keep-setid"}

	push := filepath.Join(dir, "push")
	if out, code := runBM(t, nil, append(ssh, "-M--fake-super", src, "box2:"+push)...); code != 0 {
		t.Fatalf("push: exit %d:\n%s", code, out)
	}
	want := []string{"f 100644 0,0 1234:5678", "hl 100644 0,0 1234:5678", "lnk 120777 0,0 3:4",
		"sub 42755 0,0 0:0", "sub/null 20666 1,3 0:0", "sub/pipe 10644 0,0 0:0", "suid 104755 0,0 0:0", "tmp 41777 0,0 0:0"}
	if got, err := fakeStats(push); err != nil || !slices.Equal(got, want) {
		t.Fatalf("the agent's user.rsync.%%stat: %q, %v; want %q", got, err, want)
	}
	if fi, err := os.Lstat(filepath.Join(push, "sub/null")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("push/sub/null: %v, %v; want a regular file", fi, err)
	}

	back := filepath.Join(dir, "back")
	if out, code := runBM(t, nil, append(ssh, "-M--fake-super", "box2:"+push, back)...); code != 0 {
		t.Fatalf("pull of the fake-super tree: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, back, treecmp.Options{Owner: true})

	fake := filepath.Join(dir, "fake")
	if out, code := runBM(t, nil, append(ssh, "--fake-super", "box2:"+src, fake)...); code != 0 {
		t.Fatalf("pull with --fake-super: exit %d:\n%s", code, out)
	}
	if got, err := fakeStats(fake); err != nil || !slices.Equal(got, want) {
		t.Fatalf("this host's user.rsync.%%stat: %q, %v; want %q", got, err, want)
	}
}
