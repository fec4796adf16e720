package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// backupTrees makes, under dir, a SRC and a DEST that a pass with
// --delete changes every way --backup keeps: files given new content, a
// file and a symlink replaced by directories, a tree replaced by a file,
// files, a symlink and a tree deleted.
func backupTrees(t *testing.T, dir string) (src, dst string) {
	t.Helper()
	src, dst = filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(p, body string, mtime bool) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if mtime {
			os.Chtimes(p, old, old)
		}
	}
	for _, f := range []string{"f", "d/g", "keep", "t2f"} {
		write(filepath.Join(src, f), "new "+f, false)
	}
	os.MkdirAll(filepath.Join(src, "f2d"), 0o755)
	os.MkdirAll(filepath.Join(src, "s2d"), 0o755)
	for _, f := range []string{"f", "d/g", "extra", "gone/a", "gone/sub/b", "t2f/in/c", "f2d"} {
		write(filepath.Join(dst, f), "old "+f, true)
	}
	if err := os.Symlink("nowhere", filepath.Join(dst, "s2d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("t", filepath.Join(dst, "gone/l")); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

// rsyncRef is what rsync -a ARGS makes of a copy of dst (and of the
// backup directory, if absolute and given as bak), for comparison.
func rsyncRef(t *testing.T, src, dst, ref string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("compares with rsync")
	}
	if out, err := exec.Command("cp", "-a", dst, ref).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if out, err := exec.Command("rsync", append(append([]string{"-a"}, args...), src+"/", ref+"/")...).CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v: %s", err, out)
	}
}

// TestSSHBackup: --backup-dir over SSH against a real sshd, a push (the
// agent moves aside) and a pull (this host's receiver does), with a
// backup directory beneath DEST and an absolute one; the result trees,
// backups included, are rsync's, and the log names what went aside.
func TestSSHBackup(t *testing.T) {
	_, cfg, px := sshdBehindProxy(t)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	dir := shmDir(t)
	args := []string{"--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "2", "--journal", "none", "--delete"}
	for _, c := range []struct {
		name      string
		pull, abs bool
	}{{"push", false, false}, {"push-absolute", false, true}, {"pull", true, false}, {"pull-absolute", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(dir, c.name)
			src, dst := backupTrees(t, d)
			ref := filepath.Join(d, "ref")
			bak, rbak := "bak", "bak"
			if c.abs {
				bak, rbak = filepath.Join(d, "bbak"), filepath.Join(d, "rbak")
			}
			rsyncRef(t, src, dst, ref, "--delete", "--backup-dir="+rbak)
			log := filepath.Join(d, "cut.log")
			out, code := runPushPull(t, env, args, c.pull, src, dst, "--backup-dir="+bak, "-v", "--log-file="+log)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			opt := treecmp.Options{Owner: os.Geteuid() == 0, IgnoreDirMtime: true}
			treecmp.Equal(t, ref, dst, opt)
			if c.abs {
				treecmp.Equal(t, rbak, bak, opt)
			}
			where := bak + "/"
			logged, _ := os.ReadFile(log)
			for _, p := range []string{"f", "d/g", "extra", "gone/sub/b", "t2f/in/c", "f2d", "s2d"} {
				line := "backed up " + p + " to " + where + p
				if !strings.Contains(out, line+"\n") || !strings.Contains(string(logged), line+"\n") {
					t.Errorf("no %q on stderr and in the log:\n%s\n%s", line, out, logged)
				}
			}
		})
	}
}

// TestServeBackup: a push to `serve` keeps its backups beneath the job's
// DEST (a relative --backup-dir), and an absolute --backup-dir is refused
// before anything is written: serve keeps a job within its root, as an
// rsync daemon keeps backups within its module.
func TestServeBackup(t *testing.T) {
	dir := shmDir(t)
	root := filepath.Join(dir, "root")
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	src, dst := backupTrees(t, dir)
	if err := os.Rename(dst, filepath.Join(root, "dst")); err != nil {
		os.MkdirAll(root, 0o755)
		if err := os.Rename(dst, filepath.Join(root, "dst")); err != nil {
			t.Fatal(err)
		}
	}
	dst = filepath.Join(root, "dst")
	url := "bulkmove://" + addr + "/data/dst"
	outside := filepath.Join(dir, "outside")
	out, code := runBM(t, nil, "--token-file", tok, "--fingerprint", fp, "--journal", "none", "--delete", "--backup-dir="+outside, src+"/", url)
	if code == 0 || !strings.Contains(out, "--backup-dir "+outside+" (an absolute backup directory)") {
		t.Fatalf("absolute backup directory: exit %d, want a refusal naming it:\n%s", code, out)
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Error("the refused backup directory was made")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "f")); string(b) != "old f" {
		t.Errorf("f: %q: written though the job was refused", b)
	}
	ref := filepath.Join(dir, "ref")
	rsyncRef(t, src, dst, ref, "--delete", "--backup-dir=bak", "--filter=P /bak/")
	out, code = runBM(t, nil, "-j", "2", "--token-file", tok, "--fingerprint", fp, "--journal", "none", "--delete", "--backup-dir=bak", src+"/", url)
	if code != 0 {
		t.Fatalf("relative backup directory: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, ref, dst, treecmp.Options{Owner: os.Geteuid() == 0, IgnoreDirMtime: true})
}
