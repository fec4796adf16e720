package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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
	if testing.Short() {
		t.Skip("moves a few thousand files several times")
	}
	bin := testbin.Build(t)
	for _, victim := range []string{"sender", "agent"} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", victim, seed), func(t *testing.T) {
				root := shmDir(t)
				src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
				if err := gentree.Small(src, 2000, 20, 700); err != nil {
					t.Fatal(err)
				}
				want := snapshot(t, src)
				args := []string{"--remove-source-files", "--journal", "none", "-j", "2", "--batch-files", "40", "--bwlimit", "1M"}
				if victim == "agent" {
					args = append(args, "--via-agent")
				}
				cmd := exec.Command(bin, append(args, src+"/", dst)...)
				cmd.Env = append(os.Environ(), "HOME="+root, "XDG_STATE_HOME="+root)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// Killed once SRC has lost a seeded number of files,
				// however slow a loaded machine makes the start: from
				// the first batches to the last ones (2000 files of
				// 700 B at 1 MB/s: about 1.4 s). An agent killed, the
				// sender goes on with its other streams or fails.
				rng := rand.New(rand.NewPCG(seed, 29))
				gone := 1 + rng.IntN(1800)
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					n, _ := regularFiles(src)
					if len(want)-n >= gone || time.Now().After(deadline) {
						break
					}
				}
				pid := cmd.Process.Pid
				if victim == "agent" {
					kids := children(pid)
					if len(kids) == 0 {
						t.Fatalf("no agent process under the sender %d", pid)
					}
					pid = kids[rng.IntN(len(kids))]
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				cmd.Wait()
				atSrc, atDst := checkSomewhere(t, want, src, dst)
				t.Logf("killed the %s: %d files at SRC, %d at DEST", victim, atSrc, atDst)

				again := exec.Command(bin, "--remove-source-files", "--journal", "none", src+"/", dst)
				again.Env = cmd.Env
				if out, err := again.CombinedOutput(); err != nil {
					t.Fatalf("run again: %v\n%s", err, out)
				}
				atSrc, atDst = checkSomewhere(t, want, src, dst)
				if atSrc != 0 || atDst != len(want) {
					t.Errorf("after the second run: %d files at SRC, %d of %d at DEST", atSrc, atDst, len(want))
				}
			})
		}
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
