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

// TestSSHMergeFilters: in a pull the remote sender walks SRC, and reads
// its .rsync-filter and .cvsignore files there; in a push with --delete
// the remote agent keeps what DEST's .rsync-filter files exclude. Each
// result is rsync's on the same trees.
func TestSSHMergeFilters(t *testing.T) {
	t.Parallel()
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync is not on PATH: the comparison needs it")
	}
	bin := testbin.Build(t)
	home := shmDir(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+home))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	for name, content := range map[string]string{
		".rsync-filter":          "- *.o\n+ /d1/\n",
		"a.o":                    "a",
		"a.txt":                  "a",
		"d1/.rsync-filter":       "- /x.*\n+ y.o\n",
		"d1/x.c":                 "x",
		"d1/y.o":                 "y",
		"d1/z.c":                 "z",
		"d1/d2/.rsync-filter":    "!\n- z.c\n",
		"d1/d2/x.c":              "x",
		"d1/d2/y.o":              "y",
		"d1/d2/z.c":              "z",
		"d1/d2/.cvsignore":       "x.c",
		"d1/d2/d3/keep.log":      "k",
		"d1/d2/d3/core":          "c",
		"d1/d2/d3/.rsync-filter": "- keep.log\n",
	} {
		p := filepath.Join(src, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"d1/d2/d3", "d1/d2", "d1", "."} {
		os.Chtimes(filepath.Join(src, d), time2020, time2020)
	}
	want := func(name string, args ...string) string {
		w := filepath.Join(dir, name)
		cmd := exec.Command(rsync, append(append([]string{"-a"}, args...), src+"/", w+"/")...)
		cmd.Env = append(os.Environ(), "CVSIGNORE=*.log")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rsync %q: %v\n%s", args, err, out)
		}
		return w
	}
	opts := treecmp.Options{Owner: os.Geteuid() == 0}

	for i, args := range [][]string{{"-F"}, {"-FF"}, {"-C"}, {"-F", "-C"}} {
		w := want("want"+string(rune('a'+i)), args...)
		got := filepath.Join(dir, "got"+string(rune('a'+i)))
		out, code := runBM(t, []string{"CVSIGNORE=*.log"}, append([]string{"--ssh-config", cfg, "-j", "2"}, append(args, "box2:"+src, got)...)...)
		if code != 0 {
			t.Fatalf("pull %q: exit %d:\n%s", args, code, out)
		}
		treecmp.Equal(t, w, got, opts)
	}

	// A push with --delete: DEST's .rsync-filter files (sent by the
	// first push) protect what they exclude.
	w, got := want("wantdel"), filepath.Join(dir, "gotdel")
	if out, code := runBM(t, nil, "--ssh-config", cfg, src, "box2:"+got); code != 0 {
		t.Fatalf("push: exit %d:\n%s", code, out)
	}
	for _, d := range []string{w, got} {
		for _, n := range []string{"stale", "d1/x.o", "d1/d2/d3/keep.log", "d1/d2/stale.o"} {
			os.WriteFile(filepath.Join(d, n), []byte("old"), 0o644)
			os.Chtimes(filepath.Join(d, n), time2020, time2020)
		}
	}
	cmd := exec.Command(rsync, "-a", "-F", "--delete-after", src+"/", w+"/")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rsync --delete-after: %v\n%s", err, out)
	}
	if out, code := runBM(t, nil, "--ssh-config", cfg, "-F", "--delete", src, "box2:"+got); code != 0 {
		t.Fatalf("push -F --delete: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, w, got, opts)
	if _, err := os.Stat(filepath.Join(got, "d1/x.o")); err != nil {
		t.Errorf("d1/x.o, excluded by DEST's .rsync-filter, went: %v", err)
	}
}

// time2020 is a time well in the past: rsync leaves a directory's mtime
// alone within the second it was made.
var time2020 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
