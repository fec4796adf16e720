//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
)

// millionTree makes a tree of 1,000,000 entries in dir, a third of them
// set aside for the end of a move: 700,000 empty files in 100,000
// directories, 100,000 symlinks, and 100,000 second names of files.
func millionTree(t *testing.T, dir string) {
	t.Helper()
	if err := gentree.Small(dir, 700_000, 100_000, 0); err != nil {
		t.Fatal(err)
	}
	if err := gentree.Links(dir, 1); err != nil {
		t.Fatal(err)
	}
}

// TestMoveMillionBoundedMemory moves a tree of 1,000,000 entries, 300,000
// of them directories, symlinks and hard links (which wait for the end of
// the move), through two agents, and checks the peak RSS of the sender
// and of the agents (wait4's maxrss of the sender: the largest of the
// sender and its waited-for children, the agents) against a ceiling of
// 112 MiB, and that the first batch leaves within 2 s of the start (-v),
// or a loaded machine's first twentieth of the data's time.
// The sender's share: the walk's lead of batches (internal/engine), the
// deferred entries in memory before they spill, the files read ahead, and
// the garbage collector's headroom over them; holding the deferred entries
// in memory instead of spilling them took it past the bound.
// Skipped under -short.
func TestMoveMillionBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1,000,000-entry tree: skipped under -short")
	}
	root := bigTreeDir(t, 2_000_000)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	start := time.Now()
	millionTree(t, src)
	t.Logf("made the tree in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	out, rss := runMaxRSS(t, "-v", "--journal", "none", "--via-agent", "-j", "2", src, dst)
	m := regexp.MustCompile(`(?m)^bulkmove: +([0-9.]+)s first batch handed to a stream`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("-v did not say when the first batch left:\n%s", tail(out, 2000))
	}
	first, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("moved in %s: peak RSS %d MiB (sender or agent), first batch at %.3fs", time.Since(start).Round(time.Millisecond), rss>>20, first)
	if rss > 112<<20 {
		t.Errorf("peak RSS %d MiB, want under 112 MiB", rss>>20)
	}
	// Under 2 s, or (the agents slow to start on a loaded machine) in the
	// first twentieth of the data's time: a first batch that waited for
	// the walk of the million entries would leave a tenth of the way in.
	ms := regexp.MustCompile(`(?m)^bulkmove: +([0-9.]+)s data sent`).FindSubmatch(out)
	if ms == nil {
		t.Fatalf("-v did not say when the data was sent:\n%s", tail(out, 2000))
	}
	sent, _ := strconv.ParseFloat(string(ms[1]), 64)
	if first > 2 && first > sent/20 {
		t.Errorf("the first batch left %.2fs after the start (the data sent at %.2fs), want under 2s", first, sent)
	}
	// Everything arrived: as many names, and the links as links.
	var n int
	filepath.WalkDir(dst, func(string, os.DirEntry, error) error { n++; return nil })
	if n != 1_000_001 {
		t.Errorf("%d names at the destination, want 1,000,001 (the root included)", n)
	}
	st1, err1 := os.Lstat(filepath.Join(dst, "d00000", "h0"))
	st2, err2 := os.Lstat(filepath.Join(dst, "d00000", "s0"))
	if err1 != nil || err2 != nil || st1.Sys().(*syscall.Stat_t).Nlink != 2 || st2.Mode()&os.ModeSymlink == 0 {
		t.Errorf("d00000/h0 is not a second name (%v) or d00000/s0 not a symlink (%v)", err1, err2)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
