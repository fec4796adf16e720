package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHSelections: -u, --existing, --max-size and --copy-unsafe-links
// in a push over SSH (the agent decides -u and --existing) and in a pull
// (the remote sender walks with --max-size and follows the link, the
// puller decides the rest) give the tree that rsync -a gives with the
// same options.
func TestSSHSelections(t *testing.T) {
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("rsync is needed for the comparison")
	}
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst0 := filepath.Join(dir, "src"), filepath.Join(dir, "dst0")
	old, mid, recent := time.Unix(1577836800, 0), time.Unix(1609459200, 0), time.Unix(1640995200, 0)
	file := func(p, data string, mtime time.Time) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, mtime, mtime)
	}
	file(filepath.Join(src, "newer"), "src\n", old)      // newer at DEST: -u leaves it
	file(filepath.Join(dst0, "newer"), "dst\n", mid)     //
	file(filepath.Join(src, "older"), "src\n", recent)   // older at DEST: sent
	file(filepath.Join(dst0, "older"), "dst\n", mid)     //
	file(filepath.Join(src, "big"), "src big\n", recent) // over --max-size: left
	file(filepath.Join(dst0, "big"), "dst\n", mid)       //
	file(filepath.Join(src, "new"), "new\n", recent)     // not at DEST: --existing leaves it
	file(filepath.Join(src, "sub", "x"), "x\n", recent)  // nor its directory
	// A symlink out of SRC, copied as the file it points to
	// (--copy-unsafe-links), older at DEST: sent.
	file(filepath.Join(dir, "outside"), "out\n", recent)
	os.Symlink("../outside", filepath.Join(src, "out"))
	file(filepath.Join(dst0, "out"), "dst\n", mid)
	for _, d := range []string{filepath.Join(src, "sub"), src} {
		os.Chtimes(d, old, old)
	}
	os.Chtimes(dst0, mid, mid)
	opts := []string{"-u", "--existing", "--max-size=7", "--copy-unsafe-links"}
	copyTree := func(name string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if out, err := exec.Command("cp", "-a", dst0, p).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		return p
	}
	want := copyTree("rsync")
	if out, err := exec.Command("rsync", append(append([]string{"-a"}, opts...), src+"/", want+"/")...).CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v: %s", err, out)
	}
	pushed, pulled := copyTree("pushed"), copyTree("pulled")
	for _, c := range []struct{ name, from, to, got string }{
		{"push", src, "box2:" + pushed, pushed},
		{"pull", "box2:" + src, pulled, pulled},
	} {
		out, code := runBM(t, nil, append(append([]string{"--ssh-config", cfg, "-j", "2", "-q", "--journal", "none"}, opts...), c.from, c.to)...)
		if code != 0 {
			t.Fatalf("%s: exit %d:\n%s", c.name, code, out)
		}
		got := c.got
		diffs, err := treecmp.Compare(want, got, treecmp.Options{Owner: os.Geteuid() == 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) > 0 {
			t.Errorf("%s: the tree differs from rsync's:\n%s", c.name, treecmp.Format(diffs, 20))
		}
		if b, _ := os.ReadFile(filepath.Join(got, "newer")); string(b) != "dst\n" {
			t.Errorf("%s: newer holds %q, want DEST's", c.name, b)
		}
		if b, _ := os.ReadFile(filepath.Join(got, "out")); string(b) != "out\n" {
			t.Errorf("%s: out holds %q, want what the symlink points to", c.name, b)
		}
	}
}
