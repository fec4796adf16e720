package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestSSHResumeDestChanged: over SSH against a real sshd, a push cut by
// the network leaves a journal of what had landed; files of DEST are
// then deleted, truncated (their mtime kept) or touched, and the resume
// sends them again instead of taking the journal's word: DEST ends
// identical to SRC.
func TestSSHResumeDestChanged(t *testing.T) {
	t.Parallel()
	_, cfg, px := sshdBehindProxy(t)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Small(src, 4000, 40, 1024); err != nil {
		t.Fatal(err)
	}
	push := func(extra ...string) (string, int) {
		args := append([]string{"--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "-j", "2", "--batch-files", "100"}, extra...)
		return runBM(t, env, append(args, src, "box2:"+dst)...)
	}

	// The network cuts every connection after 1 MB (of about 4) and the
	// streams do not reconnect: the pass stops with a journal.
	px.CutAfter(1 << 20)
	out, code := push("--reconnect-timeout", "0")
	if code != exitFatal || px.Cuts.Load() == 0 {
		t.Fatalf("cut pass: exit %d with %d cuts, want 3 and cuts:\n%s", code, px.Cuts.Load(), out)
	}
	px.CutAfter(0)
	// The agent at DEST outlives its sender for a moment: it ends its
	// session (a batch whose data were in when the network went is
	// committed, one that was not is taken back, its files removed)
	// after the sender has seen the cut and exited. Damaged in that
	// moment, a file may be finished by the agent (written on past the
	// truncation, and given its size and mtime), or removed under the
	// test: what is tested here is what the next run does with the DEST
	// the interrupted run left, so the damage waits for that run's end.
	waitAgentsGone(t, dst, time.Minute)

	// Damage what landed: every fifth file deleted, truncated with its
	// mtime kept, or given another mtime.
	var landed []string
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			landed = append(landed, p)
		}
		return nil
	})
	if len(landed) < 100 {
		t.Fatalf("only %d files landed before the cut, want a journal of some batches:\n%s", len(landed), out)
	}
	damaged := 0
	for i, p := range landed {
		if i%5 != 0 {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		switch (i / 5) % 3 {
		case 0:
			err = os.Remove(p)
		case 1:
			if err = os.Truncate(p, 10); err == nil {
				err = os.Chtimes(p, fi.ModTime(), fi.ModTime())
			}
		case 2:
			err = os.Chtimes(p, fi.ModTime(), fi.ModTime().Add(-time.Hour))
		}
		if err != nil {
			t.Fatal(err)
		}
		damaged++
	}

	out, code = push("-v")
	if code != 0 || !strings.Contains(out, "resuming: the journal") {
		t.Fatalf("resume: exit %d, want 0 and a resume from the journal:\n%s", code, out)
	}
	if !treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0}) {
		t.Logf("the resume's output:\n%s", out)
	}
	if !strings.Contains(out, "were not in place at box2:"+dst+" (deleted or changed there since): sent again") {
		t.Errorf("resume: want the warning that journaled files went again (%d damaged):\n%s", damaged, out)
	}
}
