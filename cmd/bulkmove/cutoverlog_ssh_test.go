package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestSSHCutoverLog: --log-file over SSH, a push's passes and a pull's
// appended to one log: each pass's header names the remote SRC or DEST,
// its item lines are a push's ('<f', files sent) or a pull's ('>f',
// received, written where the pull was typed), a deletion, an entry the
// receiver failed (a non-empty directory in the way of a file) with its
// cause, and the footer's exit code.
func TestSSHCutoverLog(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src, dst, pulled := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "pulled")
	log := filepath.Join(dir, "cutover.log")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("bb\n"), 0o644)
	os.WriteFile(filepath.Join(src, "blocked"), []byte("c\n"), 0o644)
	os.Symlink("a", filepath.Join(src, "link"))
	pass := func(from, to string, code int, flags ...string) {
		t.Helper()
		out, got := runBM(t, nil, append(append([]string{"--ssh-config", cfg, "-j", "2", "-q", "--journal", "none", "--log-file", log}, flags...), from, to)...)
		if got != code {
			t.Fatalf("%s to %s: exit %d, want %d:\n%s", from, to, got, code, out)
		}
	}
	pass(src, "box2:"+dst, 0)
	os.WriteFile(filepath.Join(dst, "stray"), []byte("x"), 0o644)
	os.Chmod(filepath.Join(src, "a"), 0o600)
	pass(src, "box2:"+dst, 0, "--delete")
	pass("box2:"+src, pulled, 0)
	// DEST holds a non-empty directory where SRC has a file: the
	// receiver fails it, on the remote host for the push, here for the
	// pull.
	for _, d := range []string{dst, pulled} {
		os.Remove(filepath.Join(d, "blocked"))
		os.MkdirAll(filepath.Join(d, "blocked", "in"), 0o755)
	}
	pass(src, "box2:"+dst, 2)
	pass("box2:"+src, pulled, 2)

	passes := readPasses(t, log)
	if len(passes) != 5 {
		t.Fatalf("%d passes in the log, want 5:\n%s", len(passes), strings.Join(slices.Concat(passes...), "\n"))
	}
	// The totals' changed count leaves out DEST's directory, whose mtime
	// the test's changes there may or may not have moved off SRC's.
	type want struct {
		src, dest string
		has       []string
		totals    string
		end       string
	}
	for i, w := range []want{
		{src, "box2:" + dst, []string{"cd+++++++++ ./", "<f+++++++++ a", "cd+++++++++ sub/", "<f+++++++++ sub/b", "<f+++++++++ blocked", "cL+++++++++ link -> a"},
			`6 created, 0 changed, 0 deleted, 0 backed up, 0 failed; 7 bytes of file data sent \(7 B\)`, "exit 0 (done)"},
		{src, "box2:" + dst, []string{".f...p..... a", "*deleting   stray"},
			`0 created, [12] changed, 1 deleted, 0 backed up, 0 failed; 0 bytes of file data sent \(0 B\)`, "exit 0 (done)"},
		{"box2:" + src, pulled, []string{"cd+++++++++ ./", ">f+++++++++ a", "cd+++++++++ sub/", ">f+++++++++ sub/b", ">f+++++++++ blocked", "cL+++++++++ link -> a"},
			`6 created, 0 changed, 0 deleted, 0 backed up, 0 failed; 7 bytes of file data sent \(7 B\)`, "exit 0 (done)"},
		{src, "box2:" + dst, []string{"*failed     blocked: a non-empty directory is in the way of a file; rerun with --delete to replace it"},
			`0 created, [01] changed, 0 deleted, 0 backed up, 1 failed; 0 bytes of file data sent \(0 B\)`, "exit 2 (partial: some entries failed, each named above)"},
		{"box2:" + src, pulled, []string{"*failed     blocked: a non-empty directory is in the way of a file; rerun with --delete to replace it"},
			`0 created, [01] changed, 0 deleted, 0 backed up, 1 failed; 0 bytes of file data sent \(0 B\)`, "exit 2 (partial: some entries failed, each named above)"},
	} {
		p := passes[i]
		for _, h := range []string{"SRC: " + w.src, "DEST: " + w.dest} {
			if !slices.Contains(p, h) {
				t.Errorf("pass %d: no %q in its header:\n%s", i+1, h, strings.Join(p, "\n"))
			}
		}
		for _, h := range w.has {
			if !slices.Contains(p, h) {
				t.Errorf("pass %d: no line %q:\n%s", i+1, h, strings.Join(p, "\n"))
			}
		}
		if !slices.ContainsFunc(p, regexp.MustCompile(`^totals: `+w.totals+`$`).MatchString) {
			t.Errorf("pass %d: no totals %q:\n%s", i+1, w.totals, strings.Join(p, "\n"))
		}
		if !strings.HasSuffix(p[len(p)-1], ": "+w.end) {
			t.Errorf("pass %d ends %q, want %q", i+1, p[len(p)-1], w.end)
		}
		for _, l := range p {
			if strings.HasSuffix(l, " blocked") && !strings.HasPrefix(l, "<f+++") && !strings.HasPrefix(l, ">f+++") {
				t.Errorf("pass %d: a line for the failed entry besides its *failed line: %q", i+1, l)
			}
		}
	}
}

var logPrefix = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\d+\] `)

// readPasses reads a --log-file: each pass's lines, from its header to
// its footer, without rsync's prefix, which every line must have.
func readPasses(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var passes [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		m := logPrefix.FindString(l)
		if m == "" {
			t.Fatalf("a line of the log without rsync's prefix: %q", l)
		}
		l = l[len(m):]
		if strings.HasPrefix(l, "=== bulkmove pass start ") {
			passes = append(passes, nil)
		}
		if len(passes) == 0 {
			t.Fatalf("a line before the first header: %q", l)
		}
		passes[len(passes)-1] = append(passes[len(passes)-1], l)
	}
	return passes
}
