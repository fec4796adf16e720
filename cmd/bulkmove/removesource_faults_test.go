package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
)

// TestRemoveSourceDiskFull: a --remove-source-files move onto a DEST that
// fills up (a small tmpfs, through an agent) fails, and every file is at
// SRC or whole at DEST: a file that did not land stays at SRC. With room
// made, the move runs again to the end.
func TestRemoveSourceDiskFull(t *testing.T) {
	t.Parallel()
	small := smallTmpfs(t, "2m")
	root := shmDir(t)
	src, dst := filepath.Join(root, "src"), filepath.Join(small, "dst")
	if err := gentree.Small(src, 400, 8, 16<<10); err != nil { // 6.25 MiB
		t.Fatal(err)
	}
	want := snapshot(t, src)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	args := []string{"--remove-source-files", "--journal", "none", "--via-agent", "-j", "2", "--batch-files", "20"}
	out, code := runBM(t, env, append(args, src+"/", dst)...)
	if code == 0 {
		t.Fatalf("onto a full DEST: exit 0, want a failure:\n%s", out)
	}
	atSrc, atDst := checkSomewhere(t, want, src, dst)
	if atSrc == 0 {
		t.Fatalf("DEST full, yet nothing left at SRC (%d at DEST):\n%s", atDst, out)
	}
	t.Logf("full: %d files at SRC, %d at DEST", atSrc, atDst)
	if out, err := exec.Command("mount", "-o", "remount,size=64m", small).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	if out, code := runBM(t, env, append(args, src+"/", dst)...); code != 0 {
		t.Fatalf("with room: exit %d\n%s", code, out)
	}
	if atSrc, atDst := checkSomewhere(t, want, src, dst); atSrc != 0 || atDst != len(want) {
		t.Errorf("after the second run: %d files at SRC, %d of %d at DEST", atSrc, atDst, len(want))
	}
}

// TestSSHRemoveSourceCut: the connections of a --remove-source-files push
// over SSH are cut mid-move (every stream, a TCP reset): the streams
// redial and the move ends with every file at DEST and none at SRC;
// at no point is a file at neither.
func TestSSHRemoveSourceCut(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a few thousand files")
	}
	bin, cfg, px := sshdBehindProxy(t)
	root := shmDir(t)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	if err := gentree.Small(src, 2000, 20, 700); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, src)
	cmd := exec.Command(bin, "--ssh-config", cfg, "--port", strconv.Itoa(px.Port()), "--remove-source-files", "--journal", "none",
		"-j", "2", "--batch-files", "40", "--bwlimit", "1M", "--reconnect-timeout", "60s", src+"/", "box2:"+dst)
	cmd.Env = append(os.Environ(), "HOME="+root, "XDG_STATE_HOME="+root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Cut once a few hundred files have left SRC, however slowly a loaded
	// machine starts the move.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, _ := regularFiles(src)
		if len(want)-n >= 300 || time.Now().After(deadline) {
			break
		}
	}
	px.Reset(true)
	px.CutAll()
	checkSomewhere(t, want, src, dst)
	err := cmd.Wait()
	atSrc, atDst := checkSomewhere(t, want, src, dst)
	if err != nil || atSrc != 0 || atDst != len(want) {
		t.Fatalf("after the cut: %v, %d files at SRC, %d of %d at DEST\n%s", err, atSrc, atDst, len(want), out.String())
	}
	if !strings.Contains(out.String(), " lost: ") {
		t.Errorf("no stream was lost: the cut came too late to test anything\n%s", out.String())
	}
}
