package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/wire"
)

// TestRemoveSourceAfterDurableAck: a receiver that holds each durable
// batch's ack back a while finds every file of the batch still at SRC all
// that while (killing processes cannot show this: only an ack delayed
// past the point where the data is durable can); afterwards each file is
// at DEST and gone from SRC, but for those changed after they were read
// (content, or only their inode, as chmod does), which stay with a
// warning naming them while DEST holds what was read.
func TestRemoveSourceAfterDurableAck(t *testing.T) {
	root := shmDir(t)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	var names []string
	for d := range 4 {
		for f := range 30 {
			name := fmt.Sprintf("d%d/f%02d", d, f)
			names = append(names, name)
			writeFile(t, filepath.Join(src, name), name)
		}
	}
	writeFile(t, filepath.Join(dst, "d0/f01"), "d0/f01") // up to date at DEST: removed too
	mt := time.Unix(1e9, 0)
	for _, p := range []string{filepath.Join(src, "d0/f01"), filepath.Join(dst, "d0/f01")} {
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	const rewritten, chmodded = "d1/f05", "d2/f07"

	var mu sync.Mutex
	var early []string
	acked := map[string]bool{}
	extract.BeforeAck = func(id uint64, entries []model.Entry) {
		time.Sleep(20 * time.Millisecond) // the ack held back
		mu.Lock()
		defer mu.Unlock()
		for _, e := range entries {
			if e.Kind == model.KindDir {
				continue
			}
			if _, err := os.Lstat(filepath.Join(src, e.Path)); err != nil {
				early = append(early, e.Path)
			}
			switch e.Path {
			case rewritten:
				writeFile(t, filepath.Join(src, e.Path), "written after it was read")
			case chmodded:
				if err := os.Chmod(filepath.Join(src, e.Path), 0o600); err != nil {
					t.Error(err)
				}
			}
			acked[e.Path] = true
		}
	}
	var notAcked []string
	testRemoveHook = func(name string) {
		mu.Lock()
		defer mu.Unlock()
		if !acked[name] {
			notAcked = append(notAcked, name)
		}
	}
	t.Cleanup(func() { extract.BeforeAck, testRemoveHook = nil, nil })

	c := DefaultConfig()
	c.RemoveSourceFiles, c.Journal, c.BatchFiles, c.Jobs = true, "none", 10, 2
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	o := Job{Config: c, Src: src + "/", Dst: dst, Stdout: &bytes.Buffer{}, Stderr: &stderr}.Run(context.Background())
	if o != Partial { // the two files kept are errors, as in rsync
		t.Fatalf("outcome %v, want partial; stderr:\n%s", o, stderr.String())
	}
	if len(early) > 0 || len(notAcked) > 0 {
		t.Errorf("removed from SRC before their batch's durable ack: %v; removed unacknowledged: %v", early, notAcked)
	}
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != name {
			t.Errorf("DEST %s: %q, %v; want what was read, %q", name, got, err, name)
		}
		_, err = os.Lstat(filepath.Join(src, name))
		kept := name == rewritten || name == chmodded
		if kept != (err == nil) {
			t.Errorf("SRC %s: still there %v, want %v", name, err == nil, kept)
		}
	}
	for _, name := range []string{rewritten, chmodded} {
		if !strings.Contains(stderr.String(), filepath.Join(src, name)+" not removed from the source: changed since it was read") {
			t.Errorf("no warning naming %s; stderr:\n%s", name, stderr.String())
		}
	}
	if want := fmt.Sprintf("%d source files removed; 2 kept", len(names)-2); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveSourceParentSwapped: a directory of SRC swapped for a symlink
// to another directory after the walk (by a hostile local user) is not
// followed: the file of the same inode behind the link stays, the entry
// is kept with a warning naming it.
func TestRemoveSourceParentSwapped(t *testing.T) {
	root := shmDir(t)
	src, outside := filepath.Join(root, "src"), filepath.Join(root, "outside")
	writeFile(t, filepath.Join(src, "d/x"), "x")
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(src, "d/x"), &st); err != nil {
		t.Fatal(err)
	}
	e := model.Entry{Path: "d/x", Kind: model.KindFile, Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Dev: st.Dev, Ino: st.Ino}
	// The same inode, moved out of SRC, and d now a symlink to where it is.
	if err := os.Rename(filepath.Join(src, "d"), outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "d")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(outside, "x"), &st); err != nil {
		t.Fatal(err)
	}
	e.CTime = st.Ctim.Nano() // (a rename may change it: only the link is in the way)
	var stderr bytes.Buffer
	s := &srcRemover{root: src, stderr: &stderr, dirFd: -1, parts: map[string]int64{}, relinked: map[[2]uint64]int64{}}
	defer s.close()
	s.remove(&e)
	if _, err := os.Lstat(filepath.Join(outside, "x")); err != nil {
		t.Errorf("removed through the symlink: %v", err)
	}
	if s.removed != 0 || s.kept != 1 || !strings.Contains(stderr.String(), filepath.Join(src, "d/x")+" not removed from the source") {
		t.Errorf("removed %d, kept %d, stderr %q; want 0, 1 and a warning naming it", s.removed, s.kept, stderr.String())
	}
}

// TestRemoveSourceSplitFile: a file split into ranges goes only once every
// range is acknowledged; one whose range failed at DEST stays.
func TestRemoveSourceSplitFile(t *testing.T) {
	src := shmDir(t)
	entry := func(name string) model.Entry {
		writeFile(t, filepath.Join(src, name), "0123456789")
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(src, name), &st); err != nil {
			t.Fatal(err)
		}
		return model.Entry{Path: name, Kind: model.KindFile, Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(), Dev: st.Dev, Ino: st.Ino}
	}
	rng := func(e model.Entry, off, n int64) model.Entry { e.Off, e.Len = off, n; return e }
	whole, broken := entry("whole"), entry("broken")
	var stderr bytes.Buffer
	s := &srcRemover{root: src, stderr: &stderr, dirFd: -1, inPlace: true, parts: map[string]int64{}, relinked: map[[2]uint64]int64{}}
	defer s.close()
	ack := func(errs ...int) *wire.BatchAck {
		a := &wire.BatchAck{}
		for _, i := range errs {
			a.Errors = append(a.Errors, wire.EntryError{Index: i, Msg: "failed"})
		}
		return a
	}
	there := func(name string) bool { _, err := os.Lstat(filepath.Join(src, name)); return err == nil }
	s.done(send.Result{Batch: &model.Batch{Entries: []model.Entry{rng(whole, 0, 4), rng(broken, 0, 4)}}, Ack: ack()})
	s.done(send.Result{Batch: &model.Batch{Entries: []model.Entry{rng(whole, 4, 4), rng(broken, 4, 4)}}, Ack: ack(1)})
	if !there("whole") || !there("broken") {
		t.Fatalf("removed before its last range was acknowledged")
	}
	s.done(send.Result{Batch: &model.Batch{Entries: []model.Entry{rng(whole, 8, 2), rng(broken, 8, 2)}}, Ack: ack()})
	if there("whole") || !there("broken") {
		t.Errorf("whole: there %v, want gone; broken (a range failed): there %v, want there", there("whole"), there("broken"))
	}
}
