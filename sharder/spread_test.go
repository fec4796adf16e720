//go:build linux

package sharder

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
)

// spreadTree makes dirs directories of files empty files each under a
// new directory, and returns it.
func spreadTree(t *testing.T, dirs, files int) string {
	t.Helper()
	src := t.TempDir()
	for d := range dirs {
		dir := filepath.Join(src, fmt.Sprintf("d%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range files {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return src
}

// batchDirs returns how many directories each batch's files come from.
func batchDirs(bs []*model.Batch) []int {
	var n []int
	for _, b := range bs {
		dirs := map[string]bool{}
		for _, e := range b.Entries {
			dirs[path.Dir(e.Path)] = true
		}
		n = append(n, len(dirs))
	}
	return n
}

// spreadDirsPerBatch walks a tree of dirs directories of files files,
// decided on spreading (on) once every directory is read (all files are
// held until then, whatever the walk's pace), and returns how many
// directories each batch of per files takes its files from.
func spreadDirsPerBatch(t *testing.T, dirs, files, per int, on bool) []int {
	t.Helper()
	src := spreadTree(t, dirs, files)
	decide := make(chan bool, 1)
	opt := Options{BatchFiles: per, Spread: decide, hooks: &testHooks{}}
	opt.hooks.walkDone = func() { decide <- on }
	r := run(t, src, opt)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := len(r.files()); n != dirs*files {
		t.Fatalf("%d files in batches, want %d", n, dirs*files)
	}
	return batchDirs(r.batches)
}

// TestSpreadInTurn: told to spread, every batch takes the files of all the
// directories in turn; told not to, each batch holds one directory's files
// (two where one ends). (TestWalkDirectoryBeforeItsFiles: either way a
// file comes after its directory's Deferred call.)
func TestSpreadInTurn(t *testing.T) {
	const dirs = 10
	for i, n := range spreadDirsPerBatch(t, dirs, 30, 20, true) {
		if n != dirs {
			t.Errorf("spread: batch %d: files of %d directories, want all %d in turn", i+1, n, dirs)
		}
	}
	for i, n := range spreadDirsPerBatch(t, dirs, 30, 20, false) {
		if n > 2 {
			t.Errorf("not spread: batch %d: files of %d directories, want a directory's files together", i+1, n)
		}
	}
}

// TestSpreadManyDirectories: with more directories than spreadDirs, the
// first spreadDirs are taken in turn, and each that runs out gives its
// place to the next.
func TestSpreadManyDirectories(t *testing.T) {
	for i, n := range spreadDirsPerBatch(t, 3*spreadDirs+5, 7, spreadDirs, true) {
		if n < 2 || n > spreadDirs+1 {
			t.Errorf("batch %d: files of %d directories, want 2 to %d", i+1, n, spreadDirs+1)
		}
	}
}

// TestSpreadHoldBounded: while the decision has not come, at most
// spreadHold files wait for it; the others go on as they came, and the
// walk is not held up.
func TestSpreadHoldBounded(t *testing.T) {
	const dirs, files = 5, 1000
	src := spreadTree(t, dirs, files)
	decide := make(chan bool, 1)
	out := make(chan *model.Batch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	var wg sync.WaitGroup
	wg.Go(func() { _, err = Run(ctx, src, Options{BatchFiles: 100, Spread: decide}, out) })
	got := 0
	deadline := time.After(30 * time.Second)
	for got < dirs*files-spreadHold {
		select {
		case b := <-out:
			got += len(b.Entries)
		case <-deadline:
			t.Fatalf("only %d of %d files came out undecided: more than %d held", got, dirs*files, spreadHold)
		}
	}
	select {
	case b := <-out:
		t.Fatalf("a batch of %d files more came out undecided (%d already): fewer than %d held", len(b.Entries), got, spreadHold)
	case <-time.After(100 * time.Millisecond):
	}
	decide <- true
	for b := range out {
		got += len(b.Entries)
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got != dirs*files {
		t.Errorf("%d files in batches, want %d", got, dirs*files)
	}
}

// TestSpreadSlowWalk: spreading, files are not held until the walk ends:
// when no more come for spreadWait, those held go on.
func TestSpreadSlowWalk(t *testing.T) {
	src := spreadTree(t, 2, 3)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	decide := make(chan bool, 1)
	decide <- true
	out := make(chan *model.Batch)
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, werr = Run(context.Background(), src, Options{BatchFiles: 4, Spread: decide, FilesFrom: pr}, out)
	})
	// The list's reader hands on a directory's run of names when the next
	// name is another's: d00/f002 stays with it until the list ends.
	fmt.Fprintln(pw, "d00/f000\nd00/f001\nd01/f000\nd01/f001\nd00/f002")
	select {
	case b := <-out:
		if n := batchDirs([]*model.Batch{b})[0]; n != 2 || len(b.Entries) != 4 {
			t.Errorf("first batch: %d files of %d directories, want 4 of 2", len(b.Entries), n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("files held while the list is still open")
	}
	pw.Close()
	for b := range out {
		if len(b.Entries) != 1 || b.Entries[0].Path != "d00/f002" {
			t.Errorf("last batch: %v, want d00/f002", b.Entries)
		}
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
}
