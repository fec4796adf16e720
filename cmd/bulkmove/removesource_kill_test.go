package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestRemoveSourceKilled: a --remove-source-files move killed (SIGKILL) at
// a seeded random point, the sender itself or the agent it writes to,
// leaves every file at SRC or at DEST intact, or at both, never at
// neither and never only as a damaged copy; run again, it completes:
// everything at DEST, nothing left at SRC but its directories.
func TestRemoveSourceKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("moves a few thousand files several times")
	}
	bin := testbin.Build(t)
	for _, victim := range []string{"sender", "agent"} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", victim, seed), func(t *testing.T) {
				t.Parallel()
				var extra []string
				if victim == "agent" {
					extra = []string{"--via-agent"}
				}
				killMidMove(t, bin, seed, extra, func(src, dst string) (string, string) { return src + "/", dst },
					func(cmd *exec.Cmd, rng *rand.Rand, _ string) int {
						if victim == "sender" {
							return cmd.Process.Pid
						}
						kids := children(cmd.Process.Pid)
						if len(kids) == 0 {
							t.Fatalf("no agent process under the sender %d", cmd.Process.Pid)
						}
						return kids[rng.IntN(len(kids))]
					})
			})
		}
	}
}

// TestSSHRemoveSourceKilled: as TestRemoveSourceKilled over SSH against
// a real sshd: a push whose sender, or whose remote agent, is killed; a
// pull whose remote send-hub (the side that removes) is killed.
func TestSSHRemoveSourceKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("moves a few thousand files several times")
	}
	bin, cfg, px := sshdBehindProxy(t)
	ssh := []string{"--ssh-config", cfg, "--port", strconv.Itoa(px.Port())}
	push := func(src, dst string) (string, string) { return src + "/", "box2:" + dst }
	pull := func(src, dst string) (string, string) { return "box2:" + src + "/", dst }
	for _, c := range []struct {
		name   string
		paths  func(src, dst string) (string, string)
		victim string // a word of the victim's command line, or "" for the sender
	}{
		{"push-sender", push, ""},
		{"push-agent", push, "--agent"},
		{"pull-send-hub", pull, "--send-hub"},
	} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				t.Parallel()
				killMidMove(t, bin, seed, ssh, c.paths, func(cmd *exec.Cmd, rng *rand.Rand, root string) int {
					if c.victim == "" {
						return cmd.Process.Pid
					}
					pids := remoteBulkmoves(c.victim, root)
					if len(pids) == 0 {
						t.Fatalf("no remote process %q", c.victim)
					}
					return pids[rng.IntN(len(pids))]
				})
			})
		}
	}
}

// remoteBulkmoves lists the processes whose command line has the
// argument word and names something under root (this test's own).
func remoteBulkmoves(word, root string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, _ := os.ReadFile(f)
		args := strings.Split(string(b), "\x00")
		if !slices.Contains(args, word) || !strings.Contains(string(b), root) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killMidMove moves a tree of 2000 files with --remove-source-files (and
// extra) from SRC to DEST as paths names them, kills the process victim
// picks once SRC has lost a seeded number of files, checks that every
// file is at SRC or intact at DEST, then runs the move again to the end.
func killMidMove(t *testing.T, bin string, seed uint64, extra []string, paths func(src, dst string) (string, string), victim func(cmd *exec.Cmd, rng *rand.Rand, root string) int) {
	root := shmDir(t)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	if err := gentree.Small(src, 2000, 20, 700); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, src)
	from, to := paths(src, dst)
	args := append([]string{"--remove-source-files", "--journal", "none", "-j", "2", "--batch-files", "40", "--bwlimit", "1M"}, extra...)
	cmd := exec.Command(bin, append(args, from, to)...)
	cmd.Env = append(os.Environ(), "HOME="+root, "XDG_STATE_HOME="+root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once SRC has lost a seeded number of files, however slow a
	// loaded machine makes the start: from the first batches to the last
	// ones (2000 files of 700 B at 1 MB/s: about 1.4 s). An agent killed,
	// the sender goes on with its other streams or fails.
	rng := rand.New(rand.NewPCG(seed, 29))
	gone := 1 + rng.IntN(1800)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, _ := regularFiles(src)
		if len(want)-n >= gone || time.Now().After(deadline) {
			break
		}
	}
	if err := syscall.Kill(victim(cmd, rng, root), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	atSrc, atDst := checkSomewhere(t, want, src, dst)
	t.Logf("killed: %d files at SRC, %d at DEST", atSrc, atDst)

	again := exec.Command(bin, append(slices.Clone(extra), "--remove-source-files", "--journal", "none", from, to)...)
	again.Env = cmd.Env
	if out, err := again.CombinedOutput(); err != nil {
		t.Fatalf("run again: %v\n%s", err, out)
	}
	atSrc, atDst = checkSomewhere(t, want, src, dst)
	if atSrc != 0 || atDst != len(want) {
		t.Errorf("after the second run: %d files at SRC, %d of %d at DEST", atSrc, atDst, len(want))
	}
}

// snapshot reads every regular file under dir.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkSomewhere fails t for each file of want neither at src nor at dst
// with its content, and counts those at each.
func checkSomewhere(t *testing.T, want map[string][]byte, src, dst string) (atSrc, atDst int) {
	t.Helper()
	lost := 0
	for rel, content := range want {
		s, serr := os.ReadFile(filepath.Join(src, rel))
		d, derr := os.ReadFile(filepath.Join(dst, rel))
		inSrc := serr == nil && bytes.Equal(s, content)
		inDst := derr == nil && bytes.Equal(d, content)
		if serr == nil && !inSrc {
			t.Errorf("SRC %s changed", rel)
		}
		if inSrc {
			atSrc++
		}
		if inDst {
			atDst++
		}
		if !inSrc && !inDst {
			if lost++; lost <= 10 {
				t.Errorf("%s lost: at SRC: %v, at DEST: %v (equal %v)", rel, serr, derr, derr == nil && bytes.Equal(d, content))
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d files neither at SRC nor intact at DEST", lost, len(want))
	}
	return atSrc, atDst
}
