package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHSrcLink: a SRC that is a symlink, pushed and pulled over a real
// sshd, is followed as locally: a directory's contents land in DEST
// (DEST's own files stay without --delete, nothing named after the link
// appears), a file lands as DEST or under the link's name inside it, and
// an unrelated file of that name is left alone.
func TestSSHSrcLink(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	at := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }
	os.MkdirAll(at("real", "sub"), 0o755)
	os.WriteFile(at("real", "f"), []byte("a"), 0o644)
	os.WriteFile(at("real", "sub", "g"), []byte("g"), 0o644)
	os.Symlink("f", at("real", "inner")) // stays a symlink
	os.Symlink(at("real"), at("abslink"))
	os.Symlink("real", at("rellink"))
	os.Symlink("rellink", at("chain"))
	os.WriteFile(at("f.real"), []byte("data"), 0o644)
	os.Symlink("f.real", at("f.link"))
	own := treecmp.Options{Owner: os.Geteuid() == 0}
	withKeep := func(d string) string {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "keep"), []byte("k"), 0o644)
		return d
	}
	for _, c := range []struct {
		name   string
		args   []string
		dst    string
		delete bool
	}{
		{"push absolute link", nil, "box2:" + withKeep(at("T1")), false},
		{"push chain --delete", []string{"--delete"}, "box2:" + withKeep(at("T2")), true},
		{"pull relative link", nil, withKeep(at("T3")), false},
		{"pull chain --delete", []string{"--delete"}, withKeep(at("T4")), true},
	} {
		src := at("abslink")
		if strings.Contains(c.name, "chain") {
			src = at("chain")
		}
		if strings.HasPrefix(c.name, "pull") {
			if strings.Contains(c.name, "relative") {
				src = at("rellink")
			}
			src = "box2:" + src
		}
		args := append([]string{"--ssh-config", cfg, "-j", "2", "--journal", "none"}, c.args...)
		out, code := runBM(t, nil, append(args, src, c.dst)...)
		if code != 0 {
			t.Fatalf("%s: exit %d:\n%s", c.name, code, out)
		}
		d := strings.TrimPrefix(c.dst, "box2:")
		treecmp.Equal(t, at("real"), d, treecmp.Options{Owner: own.Owner, AllowExtra: !c.delete})
		if _, err := os.Stat(filepath.Join(d, "keep")); (err == nil) == c.delete {
			t.Errorf("%s: DEST's own file kept: %v, want %v", c.name, err == nil, !c.delete)
		}
		for _, n := range []string{"abslink", "rellink", "chain"} {
			if _, err := os.Lstat(filepath.Join(d, n)); err == nil {
				t.Errorf("%s: %s appeared in DEST", c.name, n)
			}
		}
	}
	// A file: as a new name, and into a directory under the link's name.
	os.MkdirAll(at("b"), 0o755)
	os.WriteFile(at("b", "f.link"), []byte("precious"), 0o644)
	os.MkdirAll(at("into"), 0o755)
	os.MkdirAll(at("pulled"), 0o755)
	for _, c := range [][2]string{
		{at("f.link"), "box2:" + at("b", "newname")},
		{at("f.link"), "box2:" + at("into") + "/"},
		{"box2:" + at("f.link"), at("b", "pullname")},
		{"box2:" + at("f.link"), at("pulled")},
	} {
		out, code := runBM(t, nil, "--ssh-config", cfg, "--journal", "none", c[0], c[1])
		if code != 0 {
			t.Fatalf("%s %s: exit %d:\n%s", c[0], c[1], code, out)
		}
	}
	for _, p := range []string{at("b", "newname"), at("into", "f.link"), at("b", "pullname"), at("pulled", "f.link")} {
		fi, err := os.Lstat(p)
		if b, _ := os.ReadFile(p); err != nil || !fi.Mode().IsRegular() || string(b) != "data" {
			t.Errorf("%s: %v, %q: want a regular file holding the data", p, err, b)
		}
	}
	if b, _ := os.ReadFile(at("b", "f.link")); string(b) != "precious" {
		t.Errorf("the unrelated b/f.link now holds %q", b)
	}
}

// TestSSHOverlapRefused: over SSH to the machine it runs on, a SRC inside
// DEST (with --delete too), or a DEST inside SRC, is refused by the agent
// of a push and by the sending end of a pull: exit 3 with the reason,
// naming both paths; SRC is left as it was.
func TestSSHOverlapRefused(t *testing.T) {
	t.Parallel()
	if paths.HostID() == "" {
		t.Skip("no machine-id here: the remote end cannot tell it is on the same machine")
	}
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	x := overlapTree(t)
	child := filepath.Join(x, "child")
	os.Symlink(x, filepath.Join(filepath.Dir(x), "xlink"))
	xlink := filepath.Join(filepath.Dir(x), "xlink")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{child, "box2:" + x}, "source " + child + " is inside the destination " + x},
		{[]string{"--delete", child, "box2:" + x}, "source " + child + " is inside the destination " + x},
		{[]string{"--delete", child, "box2:" + xlink}, "source " + child + " is inside the destination " + xlink},
		{[]string{"--transport", "tcp", "--delete", child, "box2:" + x}, "source " + child + " is inside the destination " + x},
		{[]string{x, "box2:" + filepath.Join(child, "new")}, "destination " + filepath.Join(child, "new") + " is inside the source " + x},
		{[]string{filepath.Join(x, "y"), "box2:" + x + "/"}, "are the same"},
		{[]string{"box2:" + child, x}, "source " + child + " is inside the destination " + x},
		{[]string{"--delete", "box2:" + child, x}, "source " + child + " is inside the destination " + x},
		{[]string{"box2:" + x, filepath.Join(child, "new")}, "destination " + filepath.Join(child, "new") + " is inside the source " + x},
	} {
		out, code := runBM(t, nil, append([]string{"--ssh-config", cfg, "-j", "2", "--journal", "none"}, c.args...)...)
		if code != exitFatal || !strings.Contains(out, "box2 refused the job: on this host, ") || !strings.Contains(out, c.want) {
			t.Errorf("bulkmove %s: exit %d, want %d and %q:\n%s", strings.Join(c.args, " "), code, exitFatal, c.want, out)
		}
		untouched(t, x)
	}
	if _, err := os.Stat(filepath.Join(child, "new")); err == nil {
		t.Errorf("DEST inside SRC was created")
	}
	// An agent a push with --linger left there takes new jobs on its
	// socket: it refuses the same way.
	apart := filepath.Join(filepath.Dir(x), "apart")
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	t.Cleanup(func() { exec.Command("pkill", "-f", "--", "--hub 2 --linger 1m0s -- "+apart).Run() })
	args := []string{"--ssh-config", cfg, "-j", "2", "--journal", "none", "--linger", "1m", "-v"}
	if out, code := runBM(t, env, append(args, child, "box2:"+apart)...); code != 0 {
		t.Fatalf("push to leave an agent: exit %d:\n%s", code, out)
	}
	out, code := runBM(t, env, append(args, "--delete", child, "box2:"+x)...)
	if want := "source " + child + " is inside the destination " + x; code != exitFatal || !strings.Contains(out, want) ||
		!strings.Contains(out, "no lingering agent on box2 (") || !strings.Contains(out, "BULKMOVE-REFUSED on this host, "+want) {
		t.Errorf("to a lingering agent: exit %d, want %d, its refusal and %q:\n%s", code, exitFatal, want, out)
	}
	untouched(t, x)
}
