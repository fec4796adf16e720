//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHFaithful: over SSH, pushed and pulled with -X -A --keep-setid
// (a capability is kept with setuid bits), a file keeps
// its user and trusted attributes and its ACL, a binary its capability, a
// directory its default ACL, a symlink its trusted attribute, and a 100 MiB
// file with 2 MiB of data stays sparse, as getfattr, getfacl, getcap and
// du see them at the source. (faithful.txtar does the same locally.)
func TestSSHFaithful(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("trusted.* attributes and capabilities need root")
	}
	for _, tool := range []string{"setfattr", "getfattr", "setfacl", "getfacl", "setcap", "getcap", "du", "truncate", "dd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (apt-get install attr acl libcap2-bin)", tool)
		}
	}
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("a file with attributes\n"), 0o644)
	os.WriteFile(filepath.Join(src, "tool"), []byte("a file with a capability\n"), 0o755)
	os.Symlink("f", filepath.Join(src, "lnk"))
	sh(t, src, "setfattr -n user.color -v blue f && setfattr -n trusted.note -v t1 f && setfacl -m u:nobody:rw f && "+
		"setcap cap_net_raw+ep tool && setfattr -n user.dir -v d1 d && setfacl -m g:nogroup:rx d && setfacl -d -m u:nobody:rx d && "+
		"setfattr -h -n trusted.link -v l1 lnk && truncate -s 100M sparse.img && "+
		"dd if=/dev/urandom of=sparse.img bs=1M count=2 seek=50 conv=notrunc status=none")
	want := faithfulView(t, src)
	if !strings.Contains(want, "2048\tsparse.img") {
		t.Skipf("the source filesystem keeps no holes:\n%s", want)
	}

	push := filepath.Join(dir, "push")
	if out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "3", "-X", "-A", "--keep-setid", src, "box2:"+push); code != 0 {
		t.Fatalf("push: exit %d:\n%s", code, out)
	}
	pull := filepath.Join(dir, "pull")
	if out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "3", "-X", "-A", "--keep-setid", "box2:"+src, pull); code != 0 {
		t.Fatalf("pull: exit %d:\n%s", code, out)
	}
	for _, dst := range []string{push, pull} {
		treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
		if got := faithfulView(t, dst); got != want {
			t.Errorf("%s differs from the source:\n--- source\n%s--- %s\n%s", filepath.Base(dst), want, filepath.Base(dst), got)
		}
	}
}

// sh runs a shell command in dir.
func sh(t *testing.T, dir, cmd string) string {
	t.Helper()
	c := exec.Command("sh", "-c", cmd)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// faithfulView is what an operator checks of a faithful copy: attributes,
// ACLs, capabilities and disk use, as the tools print them.
func faithfulView(t *testing.T, dir string) string {
	return sh(t, dir, "getfattr -h -d -m - f d tool lnk sparse.img; getfacl f d; getcap tool; du -k sparse.img")
}
