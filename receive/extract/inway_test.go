package extract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveAllAtFollowsNoSymlink: a tree holding symlinks to a directory
// outside it (absolute and relative, at the top and deeper) is removed
// whole, the links as links: what they point at is untouched. A name that
// is itself a symlink to a directory loses the link only.
func TestRemoveAllAtFollowsNoSymlink(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	root := filepath.Join(base, "root")
	for _, d := range []string{filepath.Join(outside, "sub"), filepath.Join(root, "tree/a/b")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	precious := []string{filepath.Join(outside, "precious"), filepath.Join(outside, "sub/deep")}
	for _, p := range append(precious, filepath.Join(root, "tree/f"), filepath.Join(root, "tree/a/b/g")) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"tree/abs":      outside,
		"tree/a/rel":    "../../outside",
		"tree/a/b/rel2": "../../../../outside/sub",
		"link":          outside,
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{"tree", "link"} {
		if err := removeAllAt(int(d.Fd()), name); err != nil {
			t.Fatalf("removeAllAt(%s): %v", name, err)
		}
		if _, err := os.Lstat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", name, err)
		}
	}
	for _, p := range precious {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("removed through a symlink: %v", err)
		}
	}
	// A missing name is no error.
	if err := removeAllAt(int(d.Fd()), "nothing"); err != nil {
		t.Errorf("removeAllAt of a missing name: %v", err)
	}
}

// TestOpenWayFollowsNoSymlink: a file where a directory or a parent of
// it must be is replaced by the directory; a symlink there (to a
// directory outside the root or inside it) is never followed, and
// replaced only with Delete: without it, it stays and the open fails
// naming it.
func TestOpenWayFollowsNoSymlink(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	root := filepath.Join(base, "root")
	for _, d := range []string{outside, filepath.Join(root, "inside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("inside", filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(opt Options) *Receiver {
		r, err := Open(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	mkdirIn := func(r *Receiver, p string) {
		t.Helper()
		f, err := r.openWay(p, nil)
		if err != nil {
			t.Fatalf("openWay(%s): %v", p, err)
		}
		defer f.Close()
		if err := unix.Mkdirat(int(f.Fd()), "made", 0o755); err != nil {
			t.Fatal(err)
		}
		for q := p; q != "."; q = filepath.Dir(q) {
			if fi, err := os.Lstat(filepath.Join(root, q)); err != nil || !fi.IsDir() {
				t.Errorf("%s is not a directory: %v", q, err)
			}
		}
	}
	r := open(Options{})
	mkdirIn(r, "file/a")
	for _, p := range []string{"out/a/b", "in/a"} {
		link := strings.Split(p, "/")[0]
		if _, err := r.openWay(p, nil); err == nil || !strings.Contains(err.Error(), link+": is a symlink") || !strings.Contains(err.Error(), "--delete") {
			t.Errorf("openWay(%s) without Delete: %v; want the symlink refused, naming it and --delete", p, err)
		}
		if fi, err := os.Lstat(filepath.Join(root, link)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s without Delete: %v %v; want the symlink left", link, fi, err)
		}
	}
	r = open(Options{Delete: true})
	mkdirIn(r, "out/a/b")
	mkdirIn(r, "in/a")
	for _, d := range []string{outside, filepath.Join(root, "inside")} {
		if names, err := os.ReadDir(d); err != nil || len(names) != 0 {
			t.Errorf("%s was written through a symlink: %v %v", d, names, err)
		}
	}
}
