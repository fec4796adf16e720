package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
	"golang.org/x/sys/unix"
)

// TestServeRefusals: every refusal of `bulkmove serve` reaches the
// sender, which shows the reason once ("serve HOST refused: REASON"),
// exits 3 and does not try again: a wrong token, an unknown root, a path
// out of the root, a destination that is a symlink (out of the root, or to
// another tree inside it) and one with a file in the way.
func TestServeRefusals(t *testing.T) {
	dir := shmDir(t)
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "other"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("other", filepath.Join(root, "in"))
	os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644)
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	bad := filepath.Join(dir, "bad-token")
	os.WriteFile(bad, []byte("wrong-token-0123456789\n"), 0o600)
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	for _, tc := range []struct{ name, token, dest, reason string }{
		{"wrong token", bad, "data/x", "wrong token"},
		{"unknown root", tok, "nope/x", `no root named "nope"`},
		{"out of the root", tok, "data/../../etc", `"data/../../etc" leaves the root data`},
		{"symlink out of the root", tok, "data/out/x", "data/out: a symlink"},
		{"symlink inside the root", tok, "data/in", "data/in: a symlink"},
		{"file in the way", tok, "data/file/x", "data/file: not a directory"},
	} {
		start := time.Now()
		out, code := runBM(t, nil, "-j", "3", "--token-file", tc.token, "--fingerprint", fp, src, "bulkmove://"+addr+"/"+tc.dest)
		took := time.Since(start)
		want := "bulkmove: serve " + addr + " refused: " + tc.reason
		if code != exitFatal || strings.Count(out, want) != 1 || strings.Count(out, "refused") != 1 || took > refusedWithin {
			t.Errorf("%s: exit %d after %s, want 3 at once, saying %q once:\n%s", tc.name, code, took.Round(time.Millisecond), want, out)
		}
	}
	for _, d := range []string{outside, filepath.Join(root, "other")} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s: %d entries written there", d, len(ents))
		}
	}
}

// TestServeDestSwapRace: a local user on the server swaps the job's
// destination for a symlink out of the root, and back, in a tight loop
// while pushes run. Nothing ever lands outside the root; each push lands
// inside it (in the directory it opened, wherever that was renamed to) or
// is refused, the reason naming the destination.
func TestServeDestSwapRace(t *testing.T) {
	dir := shmDir(t)
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	x := filepath.Join(root, "x")
	for _, d := range []string{x, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	var pause sync.Mutex // held while the test looks for a push's file
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pause.Lock()
			// Renames only, never onto a name that exists: the attacker
			// deletes nothing, so whatever a push wrote stays findable.
			held := filepath.Join(root, fmt.Sprintf("held.%d", i))
			if unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, held, unix.RENAME_NOREPLACE) == nil {
				if os.Symlink(outside, x) == nil {
					swaps.Add(1)
					os.Remove(x)
				}
				unix.Renameat2(unix.AT_FDCWD, held, unix.AT_FDCWD, x, unix.RENAME_NOREPLACE)
			}
			pause.Unlock()
		}
	})
	defer func() { close(stop); wg.Wait() }()
	landed, refused := 0, 0
	for n := range 30 {
		src := filepath.Join(dir, fmt.Sprintf("src%d", n))
		name := fmt.Sprintf("push%d", n)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, name), []byte(name), 0o644)
		out, code := runBM(t, nil, "-j", "2", "--token-file", tok, "--fingerprint", fp, src, "bulkmove://"+addr+"/data/x")
		switch {
		case code == exitOK:
			pause.Lock()
			found := foundUnder(root, name)
			pause.Unlock()
			if !found {
				t.Errorf("push %d: exit 0, but %s is nowhere under the root:\n%s", n, name, out)
			}
			landed++
		case code == exitFatal && strings.Contains(out, "bulkmove: serve "+addr+" refused: data/x: "):
			refused++
		default:
			t.Errorf("push %d: exit %d, want it landed or refused for the symlink:\n%s", n, code, out)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("push %d: %d entries written outside the root (%s), after %d swaps", n, len(ents), ents[0].Name(), swaps.Load())
		}
	}
	t.Logf("%d pushes landed, %d refused, %d swaps", landed, refused, swaps.Load())
	if swaps.Load() < 30 {
		t.Errorf("only %d swaps: the race was not run", swaps.Load())
	}
}

// foundUnder reports whether a file named name, holding its name, is
// anywhere under root (symlinks not followed).
func foundUnder(root, name string) bool {
	found := false
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == name && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); string(b) == name {
				found = true
			}
		}
		return nil
	})
	return found
}

// TestServeTwoJobSymlink: a job greets for data/x and pauses; meanwhile
// a second job of the same sender replaces x by a symlink out of the root
// (deletes x, sends a symlink x); then the first job sends its Hello and
// a file. Nothing is written outside the root: the
// job works in the directory its greeting opened, or is refused.
func TestServeTwoJobSymlink(t *testing.T) {
	dir := shmDir(t)
	root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	os.MkdirAll(outside, 0o755)
	addr, fp, tokFile := startServeBin(t, dir, "data="+root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialServeJob(ctx, t, addr, fp, tokFile, "job-a", "data/x")
	defer c.Close()
	// The greeting makes x.
	x := filepath.Join(root, "x")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Lstat(x); err == nil && fi.IsDir() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not make the job's destination")
		}
	}
	// The second job (another run of the same sender, as any holder of
	// the token can): a --delete from an empty tree over the root, which
	// removes x, then a tree whose x is a symlink out of the root.
	srcB := filepath.Join(dir, "srcB")
	os.MkdirAll(srcB, 0o755)
	for _, del := range []bool{true, false} {
		args := []string{"-j", "1", "--token-file", tokFile, "--fingerprint", fp, srcB, "bulkmove://" + addr + "/data"}
		if del {
			args = append([]string{"--delete", "--no-delete-guard"}, args...)
		} else if err := os.Symlink(outside, filepath.Join(srcB, "x")); err != nil {
			t.Fatal(err)
		}
		if out, code := runBM(t, nil, args...); code != 0 {
			t.Fatalf("job b: exit %d:\n%s", code, out)
		}
	}
	if fi, err := os.Lstat(x); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("job b did not make x a symlink out of the root: %v", err)
	}
	srcDir := filepath.Join(dir, "src")
	os.MkdirAll(srcDir, 0o755)
	os.WriteFile(filepath.Join(srcDir, "f"), []byte("secret"), 0o644)
	fi, _ := os.Stat(filepath.Join(srcDir, "f"))
	e := model.Entry{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Nlink: 1}
	conn, err := send.Dial(ctx, "job a", c, c, c, engine.Version, wire.ReceiveOptions{Check: wire.CheckQuick}, source.Source{Root: srcDir})
	if err == nil {
		in := make(chan *model.Batch, 1)
		in <- &model.Batch{ID: 1, Entries: []model.Entry{e}, Bytes: e.Size}
		close(in)
		_, err = conn.Run(ctx, in, func(send.Result) {})
		if err == nil {
			_, err = conn.Close(ctx)
		}
	}
	t.Logf("job a: %v", err)
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("%d entries written outside the root (%s)", len(ents), ents[0].Name())
	}
}

// refusedWithin is how soon a refused job ends: "at once", against the
// five minutes a lost stream would try to reconnect (--reconnect-timeout),
// with room for a process's start and a handshake on a loaded machine.
const refusedWithin = 20 * time.Second

// TestAgentRefusal: an agent that refuses the handshake (here its
// destination cannot be made: a file is in the way) is shown once, as the
// agent's reason; the sender exits 3 at once.
func TestAgentRefusal(t *testing.T) {
	testbin.Build(t) // built before the clock starts
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	os.WriteFile(filepath.Join(dir, "blocker"), []byte("x"), 0o644)
	dst := filepath.Join(dir, "blocker", "sub")
	start := time.Now()
	out, code := runBM(t, nil, "--via-agent", "-j", "3", src, dst)
	took := time.Since(start)
	want := "bulkmove: the agent refused: " + dst + ": create destination: mkdir " + filepath.Join(dir, "blocker") + ": not a directory"
	if code != exitFatal || strings.Count(out, want) != 1 || strings.Count(out, "not a directory") != 1 || took > refusedWithin {
		t.Errorf("exit %d after %s, want 3 at once, saying %q once:\n%s", code, took.Round(time.Millisecond), want, out)
	}
}
