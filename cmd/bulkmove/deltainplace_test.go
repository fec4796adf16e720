package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/wire"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// checkInPlace fails t unless DEST's file p holds want under the inode
// ino, with no temporary or in-place marker left beside it.
func checkInPlace(t *testing.T, p string, want []byte, ino uint64) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s at DEST differs from SRC's (%d bytes, want %d)", p, len(got), len(want))
	}
	if got := inode(t, p); got != ino {
		t.Errorf("%s: inode %d, was %d: not patched in place", p, got, ino)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".bulkmove*")); len(left) > 0 {
		t.Errorf("left at DEST: %v", left)
	}
}

// TestDeltaInPlace: with --inplace, changed large files go as a block
// delta written into DEST's files themselves (pushed to local agents and
// over SSH, pulled over SSH): each ends byte for byte as SRC's, under its
// old inode, and only the changed blocks travel.
func TestDeltaInPlace(t *testing.T) {
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	for _, mode := range []string{"via-agent", "ssh", "pull"} {
		t.Run(mode, func(t *testing.T) {
			dir := shmDir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			want := deltaTree(t, src, dst)
			inos := map[string]uint64{}
			var most int64
			for _, c := range deltaCases {
				inos[c.name] = inode(t, filepath.Join(dst, c.name))
				most += c.maxSent
			}
			args := []string{"--inplace", "--split-size", "0", "--delta-min", "1MiB", "--stats", "-v", "-j", "2"}
			out, code := runDeltaMode(t, mode, args, cfg, src, dst)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for name, b := range want {
				checkInPlace(t, filepath.Join(dst, name), b, inos[name])
			}
			if n := sentBytes(t, out); n > most {
				t.Errorf("%d bytes sent, want at most %d", n, most)
			}
		})
	}
}

// TestDeltaInPlaceResume: a push with --inplace killed at a seeded point
// mid-patch leaves DEST's file torn (part new, part old); with its size
// and mtime then forged to SRC's, the rerun does not take it for up to
// date: it finishes the patch, sending less than the whole file, and the
// file ends as SRC's, checked end to end, under its old inode.
func TestDeltaInPlaceResume(t *testing.T) {
	bin := testbin.Build(t)
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		os.MkdirAll(d, 0o755)
	}
	r := rand.New(rand.NewPCG(30, 8))
	const size = 8 << 20
	old, now := randBytes(r, size), randBytes(r, size)
	f := filepath.Join(dst, "vm.img")
	os.WriteFile(f, old, 0o644)
	then := time.Now().Add(-time.Hour)
	os.Chtimes(f, then, then)
	os.WriteFile(filepath.Join(src, "vm.img"), now, 0o644)
	ino := inode(t, f)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	args := []string{"--via-agent", "--inplace", "--split-size", "0", "--delta-min", "1MiB", "-j", "1", "--stats", "-v"}

	// 1 MiB/s: eight seconds for the file. Killed once a seeded block in
	// its first half holds the new data.
	bs := wire.BlockSize(size)
	k := int64(4 + r.IntN(int(size/bs/2-4)))
	cmd := exec.Command(bin, append(args, "--bwlimit", "1M", src+"/", dst)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	blk := make([]byte, bs)
	for reached := false; !reached; {
		select {
		case err := <-exited:
			t.Fatalf("the push ended (%v) before block %d was patched:\n%s", err, k, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		h, err := os.Open(f)
		if err != nil {
			continue
		}
		n, _ := h.ReadAt(blk, k*bs)
		h.Close()
		reached = int64(n) == bs && bytes.Equal(blk, now[k*bs:(k+1)*bs])
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	// The agents die with it (its process group); the last of them
	// releases the file's lock as it goes.
	for start := time.Now(); ; {
		h, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Flock(int(h.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		h.Close()
		if err == nil {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatal("the killed agents still hold DEST's file locked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	torn, _ := os.ReadFile(f)
	if bytes.Equal(torn, now) || bytes.Equal(torn, old) {
		t.Fatalf("killed at block %d, DEST's file is not torn", k)
	}
	if m, _ := filepath.Glob(filepath.Join(dst, ".bulkmove.inplace.*")); len(m) != 1 {
		t.Fatalf("markers %v: want one for vm.img", m)
	}
	// Forged: size and mtime as SRC's, as a quick check compares them.
	st, _ := os.Stat(filepath.Join(src, "vm.img"))
	os.Truncate(f, size)
	os.Chtimes(f, st.ModTime(), st.ModTime())

	o, code := runBM(t, env, append(args, src+"/", dst)...)
	if code != 0 {
		t.Fatalf("rerun: exit %d:\n%s", code, o)
	}
	checkInPlace(t, f, now, ino)
	if !strings.Contains(o, "delta: vm.img ") {
		t.Errorf("the rerun does not say vm.img went as a delta:\n%s", o)
	}
	if n := sentBytes(t, o); n >= size-k*bs {
		t.Errorf("the rerun sent %d bytes: more than what the killed run left to patch (%d)", n, size-k*bs)
	}
	// And the file is trusted once finished.
	o, code = runBM(t, env, append(args, src+"/", dst)...)
	if code != 0 || strings.Contains(o, "delta: vm.img") {
		t.Fatalf("third run: exit %d, want nothing sent:\n%s", code, o)
	}
}

// TestDeltaInPlaceNoRoom: a DEST without room for the temporary copy of
// a changed large file (a small tmpfs: no reflinks) refuses it before a
// byte of it is sent, naming it and --inplace, and leaves it as it was;
// with --inplace the same command patches it where it is.
func TestDeltaInPlaceNoRoom(t *testing.T) {
	// 8 MiB of the 12: no room for a copy.
	src, dst, f, old, now, ino := noRoomFile(t, "12m", deltaSize, "edits", 30)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	args := []string{"--via-agent", "--split-size", "0", "--delta-min", "1MiB", "--stats"}

	out, code := runBM(t, env, append(args, src+"/", dst)...)
	if code == 0 || !strings.Contains(out, "receive edits: no room for the temporary copy") || !strings.Contains(out, "--inplace") {
		t.Fatalf("exit %d, want edits refused for want of room, pointing to --inplace:\n%s", code, out)
	}
	if n := sentBytes(t, out); n > 64<<10 {
		t.Errorf("%d bytes sent for a file refused before its data", n)
	}
	if got, _ := os.ReadFile(f); !bytes.Equal(got, old) {
		t.Fatal("DEST's file changed")
	}

	out, code = runBM(t, env, append(args, "--inplace", src+"/", dst)...)
	if code != 0 {
		t.Fatalf("--inplace: exit %d:\n%s", code, out)
	}
	checkInPlace(t, f, now, ino)
}

// TestDeltaInPlaceLargeFile: a file larger than the default split size,
// changed, on a DEST with no room for a second copy of it: with --inplace
// and no --split-size, it goes whole (its ranges would each land in a
// partial, a copy) and is patched where it is.
func TestDeltaInPlaceLargeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("a 72 MiB file: skipped under -short")
	}
	const size = 72 << 20 // over the auto split size (64 MiB)
	src, dst, f, _, now, ino := noRoomFile(t, "100m", size, "image", 72)
	env := []string{"XDG_STATE_HOME=" + t.TempDir()}
	args := []string{"--via-agent", "--inplace", "--stats", "-j", "2"}

	out, code := runBM(t, env, append(args, src+"/", dst)...)
	if code != 0 {
		t.Fatalf("--inplace: exit %d:\n%s", code, out)
	}
	checkInPlace(t, f, now, ino)
	if n := sentBytes(t, out); n > size/10 {
		t.Errorf("%d bytes sent for 1,600 bytes changed in %d: not a delta", n, size)
	}
}

// noRoomFile makes SRC (on /dev/shm) and DEST (on a tmpfs of tmpfsSize)
// with a file name of size random bytes: DEST's old version an hour old,
// SRC's with editRuns' changes. It returns both directories, DEST's file,
// both versions and the file's inode.
func noRoomFile(t *testing.T, tmpfsSize string, size int, name string, seed uint64) (src, dst, f string, old, now []byte, ino uint64) {
	t.Helper()
	small := smallTmpfs(t, tmpfsSize)
	src, dst = filepath.Join(shmDir(t), "src"), filepath.Join(small, "dst")
	for _, d := range []string{src, dst} {
		os.MkdirAll(d, 0o755)
	}
	r := rand.New(rand.NewPCG(seed, 9))
	old = randBytes(r, size)
	now = editRuns(r, old)
	f = filepath.Join(dst, name)
	if err := os.WriteFile(f, old, 0o644); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Hour)
	os.Chtimes(f, then, then)
	if err := os.WriteFile(filepath.Join(src, name), now, 0o644); err != nil {
		t.Fatal(err)
	}
	return src, dst, f, old, now, inode(t, f)
}
