package source

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// TestSampleConcurrent: on a slow source the files of a batch's sample
// are opened at once, not one after the other (on a 1 ms filesystem the
// opens of one sample held each batch back 130-190 ms), and the sample
// keeps the batch's order. Each open waits until all have begun: opened
// one at a time, the first would wait for ever (here 10 s).
func TestSampleConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	m := &wire.BatchManifest{}
	for i := range n {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("<%d/>tail", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		m.Entries = append(m.Entries, model.Entry{Path: name, Kind: model.KindFile, Size: 4})
	}
	need := make([]bool, n)
	for i := range need {
		need[i] = true
	}
	var mu sync.Mutex
	begun := 0
	all := make(chan struct{})
	var waitedOut atomic.Bool
	barrier := func(string) {
		mu.Lock()
		if begun++; begun == n {
			close(all)
		}
		mu.Unlock()
		if waitedOut.Load() {
			return
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			waitedOut.Store(true)
		}
	}
	src := Source{Root: dir, IO: ioconc.Fixed(n)}.WithOpenHook(barrier)
	got := src.Sample(m, need, nil, 64<<10, 64)
	if waitedOut.Load() {
		t.Error("the sample's files were opened one after the other")
	}
	if want := "<0/><1/><2/><3/><4/><5/><6/><7/>"; string(got) != want {
		t.Errorf("sample %q, want %q (each file's first 4 bytes, in the batch's order)", got, want)
	}
}
