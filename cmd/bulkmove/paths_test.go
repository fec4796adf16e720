package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/wire"
)

// overlapTree makes DIR/X/child/x and DIR/X/y, and returns DIR/X.
func overlapTree(t *testing.T) string {
	t.Helper()
	x := filepath.Join(shmDir(t), "X")
	if err := os.MkdirAll(filepath.Join(x, "child"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(x, "child", "x"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(x, "y"), []byte("y"), 0o644)
	return x
}

// untouched fails the test unless X holds just what overlapTree made.
func untouched(t *testing.T, x string) {
	t.Helper()
	var got []string
	filepath.Walk(x, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(x, p)
			got = append(got, rel+"="+string(b))
		}
		return nil
	})
	if want := "child/x=x y=y"; strings.Join(got, " ") != want {
		t.Errorf("SRC changed: %q, want %q", strings.Join(got, " "), want)
	}
}

// TestOverlapBindMount: a tree reached through a bind mount has other
// paths but the same directories: SRC inside DEST, DEST inside SRC and
// SRC == DEST are refused all the same, naming both paths, and SRC is
// left as it was.
func TestOverlapBindMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root: the bind-mount overlap cases are not run")
	}
	x := overlapTree(t)
	m := filepath.Join(filepath.Dir(x), "M")
	os.Mkdir(m, 0o755)
	if err := syscall.Mount(x, m, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("mount --bind %s %s: %v: the bind-mount overlap cases are not run", x, m, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(m, 0); err != nil {
			t.Errorf("umount %s: %v", m, err)
		}
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--delete", filepath.Join(m, "child"), x}, "source " + filepath.Join(m, "child") + " is inside the destination " + x},
		{[]string{"--delete", filepath.Join(x, "child"), m}, "source " + filepath.Join(x, "child") + " is inside the destination " + m},
		{[]string{"--via-agent", "-j", "2", "--delete", filepath.Join(x, "child"), m}, "source " + filepath.Join(x, "child") + " is inside the destination " + m},
		{[]string{m, filepath.Join(x, "child", "new")}, "destination " + filepath.Join(x, "child", "new") + " is inside the source " + m},
		{[]string{"--delete", x, m}, "the source " + x + " and the destination " + m + " are the same"},
		{[]string{filepath.Join(m, "y"), x}, "the source " + filepath.Join(m, "y") + " and the destination " + filepath.Join(x, "y") + " are the same"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"--journal", "none"}, c.args...), nil, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("bulkmove %s: exit %d, want %d and %q:\n%s", strings.Join(c.args, " "), code, exitUsage, c.want, errb.String())
		}
		untouched(t, x)
	}
	if _, err := os.Stat(filepath.Join(x, "child", "new")); err == nil {
		t.Errorf("DEST inside SRC was created")
	}
}

// TestAgentRefusesOverlap: an agent told the sender's SRC refuses a ROOT
// that overlaps it on this machine, in place of its banner, with the
// reason; a ROOT beside SRC is served. (A push over SSH to the same host.)
func TestAgentRefusesOverlap(t *testing.T) {
	if paths.HostID() == "" {
		t.Skip("no machine-id here: the agent cannot tell the sender's host is its own")
	}
	x := overlapTree(t)
	child := filepath.Join(x, "child")
	pl, err := paths.PlaceOf(child, child)
	if err != nil {
		t.Fatal(err)
	}
	ids := paths.HostPlace{Machine: paths.HostID(), Place: pl}.Encode()
	var out, errb bytes.Buffer
	code := run([]string{"--agent", "--src-ids", ids, "--hub", "1", x}, strings.NewReader(""), &out, &errb)
	want := "on this host, source " + child + " is inside the destination " + x
	if code != exitUsage || !strings.HasPrefix(out.String(), wire.Refused) || !strings.Contains(out.String(), want) {
		t.Fatalf("agent: exit %d, stdout %q, want %d and %q", code, out.String(), exitUsage, want)
	}
	untouched(t, x)
	// Another machine's SRC: device and inode numbers do not compare.
	other := paths.HostPlace{Machine: "another-machine", Place: pl}.Encode()
	out.Reset()
	run([]string{"--agent", "--src-ids", other, "--hub", "1", x}, strings.NewReader(""), &out, &errb)
	if !strings.HasPrefix(out.String(), wire.AgentBanner) {
		t.Errorf("another machine's SRC refused: %q", out.String())
	}
	// A ROOT apart from SRC.
	out.Reset()
	run([]string{"--agent", "--src-ids", ids, "--hub", "1", filepath.Join(filepath.Dir(x), "apart")}, strings.NewReader(""), &out, &errb)
	if !strings.HasPrefix(out.String(), wire.AgentBanner) {
		t.Errorf("a ROOT apart from SRC refused: %q", out.String())
	}
}
