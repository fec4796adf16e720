package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/extract"
)

// TestLocalOverlap: on a slow destination (many operations at once) a
// Local stream writes its next batch while a file of the one before is
// still being written, and still reports the two in order. The first
// batch's file is a FIFO, whose open waits until a writer comes.
func TestLocalOverlap(t *testing.T) {
	defer goleak.VerifyNone(t)
	src, dst := t.TempDir(), t.TempDir()
	if err := unix.Mkfifo(filepath.Join(src, "gate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "b"), []byte("bee"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(src, "b"))
	if err != nil {
		t.Fatal(err)
	}
	recv, err := extract.Open(dst, extract.Options{IOConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	l := &stream.Local{Recv: recv, Src: stream.Source{Root: src}}

	in := make(chan *sharder.Batch)
	var mu sync.Mutex
	var order []uint64
	done := func(r stream.Result) {
		mu.Lock()
		order = append(order, r.Batch.ID)
		mu.Unlock()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), in, done)
		errc <- err
	}()
	// release opens the FIFO's other end: batch 1 then reads it (and
	// reports it as no longer a regular file). end ends the stream.
	release := sync.OnceFunc(func() {
		if w, err := os.OpenFile(filepath.Join(src, "gate"), os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	})
	end := sync.OnceValue(func() error {
		release()
		close(in)
		return <-errc
	})
	defer end()

	in <- &sharder.Batch{ID: 1, Entries: []sharder.Entry{{Path: "gate", Kind: sharder.KindFile, Mode: 0o644}}}
	b := &sharder.Batch{ID: 2, Entries: []sharder.Entry{{Path: "b", Kind: sharder.KindFile, Mode: 0o644, Size: 3, MTime: st.ModTime().UnixNano()}}}
	select {
	case in <- b:
	case <-time.After(10 * time.Second):
		// The stream takes no batch while batch 1 is being written: it
		// takes batch 2 once the FIFO's writer came.
		release()
		in <- b
		t.Fatal("the stream took no second batch while batch 1 waited for its file")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dst, "b")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("batch 2 was not written while batch 1 waited for its file")
		}
	}
	mu.Lock()
	early := slices.Clone(order)
	mu.Unlock()
	if len(early) != 0 {
		t.Errorf("results %v out before batch 1's", early)
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []uint64{1, 2}) {
		t.Errorf("results in order %v, want [1 2]", order)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "b")); err != nil || string(b) != "bee" {
		t.Errorf("b: %q, %v", b, err)
	}
}
