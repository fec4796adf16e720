package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// typeChanged makes SRC and DEST trees whose entries changed type: at
// DEST a directory tree where SRC has a file (d2f), a file where SRC has a
// directory (f2d) and where it has a deeper tree (f2tree), a symlink to a
// directory outside DEST where SRC has a directory (s2d). It returns the
// directory the symlink points at.
func typeChanged(t *testing.T, src, dst string) (outside string) {
	t.Helper()
	outside = filepath.Join(filepath.Dir(dst), "outside")
	for _, d := range []string{
		filepath.Join(src, "f2d"), filepath.Join(src, "f2tree/a/b"), filepath.Join(src, "s2d"),
		filepath.Join(dst, "d2f/sub"), outside,
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{
		filepath.Join(src, "d2f"):          "was a directory",
		filepath.Join(src, "f2d/a"):        "a",
		filepath.Join(src, "f2tree/a/b/c"): "c",
		filepath.Join(src, "s2d/x"):        "x",
		filepath.Join(dst, "d2f/sub/g"):    "old",
		filepath.Join(dst, "d2f/h"):        "old",
		filepath.Join(dst, "f2d"):          "old file",
		filepath.Join(dst, "f2tree"):       "old file",
		filepath.Join(outside, "precious"): "keep",
	} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dst, "s2d")); err != nil {
		t.Fatal(err)
	}
	return outside
}

func outsideUntouched(t *testing.T, outside string) {
	t.Helper()
	names, err := os.ReadDir(outside)
	if err != nil || len(names) != 1 || names[0].Name() != "precious" {
		t.Errorf("outside DEST changed: %v %v", names, err)
	}
}

// TestSSHTypeChange: over real sshd, a push and a pull with --delete
// replace every entry whose type changed in one pass (exit 0, the trees
// equal, nothing written through the symlink); without --delete the
// directory in the way of a file is reported once, naming it and
// --delete, the symlink in the way of a directory is refused, and their
// bytes are not counted.
func TestSSHTypeChange(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	opt := treecmp.Options{Owner: os.Geteuid() == 0}

	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	outside := typeChanged(t, src, dst)
	out, code := runBM(t, nil, "--ssh-config", cfg, "-j", "3", src, "box2:"+dst)
	if code != exitPartial || strings.Count(out, "in the way") != 1 ||
		!strings.Contains(out, "d2f: a non-empty directory is in the way of a file; rerun with --delete to replace it") ||
		!strings.Contains(out, "s2d: is a symlink, not a directory; nothing written through it; if SRC has a directory there, rerun with --delete") ||
		!strings.Contains(out, "bulkmove: 2 files, 2 B in") {
		t.Fatalf("push without --delete: exit %d, want 2, the one directory in the way, the symlink refused, and 2 files of 2 B landed:\n%s", code, out)
	}
	out, code = runBM(t, nil, "--ssh-config", cfg, "-j", "3", "--delete", src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("push with --delete: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, dst, opt)
	outsideUntouched(t, outside)

	// In one pass, from the start; and a pull, whose receiver is this
	// side, told of --delete by the remote sender.
	for _, pull := range []bool{false, true} {
		dir := shmDir(t)
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		outside := typeChanged(t, src, dst)
		args := []string{"--ssh-config", cfg, "-j", "2", "--delete", src, "box2:" + dst}
		if pull {
			args[len(args)-2], args[len(args)-1] = "box2:"+src, dst
		}
		out, code := runBM(t, nil, args...)
		if code != 0 || strings.Contains(out, "in the way") {
			t.Fatalf("%v with --delete: exit %d:\n%s", args, code, out)
		}
		treecmp.Equal(t, src, dst, opt)
		outsideUntouched(t, outside)
	}
}
