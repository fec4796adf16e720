package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHRemoveSource: --remove-source-files over SSH against a real sshd,
// a push (this host removes) and a pull (the remote send-hub removes):
// DEST is SRC as it was, SRC keeps only its directories, or with
// --remove-source-dirs only its root. With --delete, what DEST had beyond
// SRC goes and nothing moved does (the files that left SRC are not taken
// for files deleted there).
func TestSSHRemoveSource(t *testing.T) {
	t.Parallel()
	_, cfg, px := sshdBehindProxy(t)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	dir := shmDir(t)
	args := []string{"--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "2", "--batch-files", "50", "--remove-source-files", "--delete"}
	for _, c := range []struct {
		name string
		dirs bool // a pull, with --remove-source-dirs
	}{{"push", false}, {"pull", true}} {
		t.Run(c.name, func(t *testing.T) {
			src, ref, dst := filepath.Join(dir, c.name, "src"), filepath.Join(dir, c.name, "ref"), filepath.Join(dir, c.name, "dst")
			if err := gentree.Mixed(src, 500, 7); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("cp", "-a", src, ref).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			if err := os.MkdirAll(filepath.Join(dst, "old"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, "old", "extra"), []byte("not at SRC"), 0o644); err != nil {
				t.Fatal(err)
			}
			var extra []string
			if c.dirs {
				extra = []string{"--remove-source-dirs"}
			}
			out, code := runPushPull(t, env, args, c.dirs, src, dst, extra...)
			if code != 0 || !strings.Contains(out, "source files removed") {
				t.Fatalf("exit %d, want 0 and a count of files removed:\n%s", code, out)
			}
			diffs, err := treecmp.Compare(ref, dst, treecmp.Options{Owner: os.Geteuid() == 0})
			if err != nil || len(diffs) > 0 {
				t.Fatalf("DEST differs from SRC as it was (%v):\n%s", err, treecmp.Format(diffs, 10))
			}
			var left []string
			filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
				if err == nil && p != src && (!d.IsDir() || c.dirs) {
					left = append(left, p)
				}
				return nil
			})
			if len(left) > 0 {
				t.Errorf("left at SRC (%d), e.g. %q\n%s", len(left), left[:min(5, len(left))], out)
			}
		})
	}
}

// TestServeRemoveSource: a push to a `serve` daemon with
// --remove-source-files leaves DEST as SRC was and SRC empty of files;
// half the tree already at DEST (found up to date) goes too.
func TestServeRemoveSource(t *testing.T) {
	dir := shmDir(t)
	root := filepath.Join(dir, "root")
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	src, ref := filepath.Join(dir, "src"), filepath.Join(dir, "ref")
	if err := gentree.Mixed(src, 600, 5); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, ref).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	url := "bulkmove://" + addr + "/data/a"
	if out, code := runBM(t, nil, "--token-file", tok, "--fingerprint", fp, src+"/", url); code != 0 {
		t.Fatalf("first push: exit %d:\n%s", code, out)
	}
	if err := gentree.Mixed(filepath.Join(src, "more"), 300, 6); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(ref)
	if out, err := exec.Command("cp", "-a", src, ref).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	out, code := runBM(t, nil, "-j", "2", "--token-file", tok, "--fingerprint", fp, "--remove-source-files", "--remove-source-dirs", src+"/", url)
	if code != 0 || !strings.Contains(out, "source files removed") {
		t.Fatalf("push: exit %d, want 0 and a count of files removed:\n%s", code, out)
	}
	treecmp.Equal(t, ref, filepath.Join(root, "a"), treecmp.Options{Owner: os.Geteuid() == 0})
	names, _ := os.ReadDir(src)
	if len(names) > 0 {
		t.Errorf("SRC still holds %d names, e.g. %s:\n%s", len(names), names[0].Name(), out)
	}
}
