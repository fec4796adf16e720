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

// TestSampleByBytes: a sample counts each part of a batch by its bytes,
// within files as across them: of files that begin with random bytes and
// end with text it takes both halves about equally (their starts alone
// once kept a batch that compresses to half plain), and of a split file's
// range it reads the range, not the file's start.
func TestSampleByBytes(t *testing.T) {
	dir := t.TempDir()
	m := &wire.BatchManifest{}
	rnd := uint32(7)
	for i := range 40 {
		size := 4<<10 + i*3000 // 4 KiB to 121 KiB
		b := make([]byte, size)
		for j := range b[:size/2] {
			rnd ^= rnd << 13
			rnd ^= rnd >> 17
			rnd ^= rnd << 5
			b[j] = byte(rnd%200) + 1 // never 0
		}
		// The text half: zeros, told apart by that.
		name := fmt.Sprintf("f%02d", i)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m.Entries = append(m.Entries, model.Entry{Path: name, Kind: model.KindFile, Size: int64(size)})
	}
	need := make([]bool, len(m.Entries))
	for i := range need {
		need[i] = true
	}
	zeros := func(b []byte) float64 {
		z := 0
		for _, c := range b {
			if c == 0 {
				z++
			}
		}
		return float64(z) / float64(len(b))
	}
	got := Source{Root: dir}.Sample(m, need, nil, 64<<10, 64)
	if len(got) < 60<<10 {
		t.Errorf("sample of %d bytes, want about 64 KiB", len(got))
	}
	if z := zeros(got); z < 0.35 || z > 0.65 {
		t.Errorf("the files' second halves are %.0f%% of the sample, want about half", 100*z)
	}

	// A range of a split file: its second half, all zeros.
	big := make([]byte, 4<<20)
	for j := range big[:2<<20] {
		big[j] = 1
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &wire.BatchManifest{Entries: []model.Entry{{Path: "big", Kind: model.KindFile, Size: 4 << 20, Off: 2 << 20, Len: 2 << 20}}}
	got = Source{Root: dir}.Sample(r, []bool{true}, got, 64<<10, 64)
	if len(got) != 64<<10 || zeros(got) != 1 {
		t.Errorf("sample of a range: %d bytes, %.0f%% of them from the range", len(got), 100*zeros(got))
	}
}
