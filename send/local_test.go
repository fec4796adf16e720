package send_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/local"
)

// TestLocalOverlap: on a slow destination (many operations at once) a
// Local stream writes its next batch while a file of the one before is
// still being written, and still reports the two in order. The open of
// the first batch's file waits until the test releases it.
func TestLocalOverlap(t *testing.T) {
	defer goleak.VerifyNone(t)
	src, dst := t.TempDir(), t.TempDir()
	files := map[string]string{"gate": "gee", "b": "bee"}
	mtimes := map[string]int64{}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		mtimes[name] = st.ModTime().UnixNano()
	}
	entry := func(name string) model.Entry {
		return model.Entry{Path: name, Kind: model.KindFile, Mode: 0o644, Size: int64(len(files[name])), MTime: mtimes[name]}
	}
	recv, err := extract.Open(dst, extract.Options{IOConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	gate := make(chan struct{})
	hold := func(p string) {
		if p == "gate" {
			<-gate
		}
	}
	l := &local.Conn{Recv: recv, Src: source.Source{Root: src}.WithOpenHook(hold)}

	in := make(chan *model.Batch)
	var mu sync.Mutex
	var order []uint64
	done := func(r send.Result) {
		mu.Lock()
		order = append(order, r.Batch.ID)
		mu.Unlock()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), in, done)
		errc <- err
	}()
	// release lets batch 1 open its file. end ends the stream.
	release := sync.OnceFunc(func() { close(gate) })
	end := sync.OnceValue(func() error {
		release()
		close(in)
		return <-errc
	})
	defer end()

	in <- &model.Batch{ID: 1, Entries: []model.Entry{entry("gate")}}
	b := &model.Batch{ID: 2, Entries: []model.Entry{entry("b")}}
	select {
	case in <- b:
	case <-time.After(10 * time.Second):
		// The stream takes no batch while batch 1 is being written: it
		// takes batch 2 once batch 1's file is opened.
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
	for name, data := range files {
		if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != data {
			t.Errorf("%s: %q, %v; want %q", name, b, err, data)
		}
	}
}

// TestLocalSourceBecameFIFO: a file the walk saw regular that is a FIFO
// by the time it is read is reported as changed, at once: its open does
// not wait for a writer (which may never come).
func TestLocalSourceBecameFIFO(t *testing.T) {
	defer goleak.VerifyNone(t)
	src, dst := t.TempDir(), t.TempDir()
	fifo := filepath.Join(src, "f")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	recv, err := extract.Open(dst, extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	l := &local.Conn{Recv: recv, Src: source.Source{Root: src}}
	in := make(chan *model.Batch, 1)
	in <- &model.Batch{ID: 1, Entries: []model.Entry{{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: 3, MTime: 1}}}
	close(in)
	results := make(chan send.Result, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), in, func(r send.Result) { results <- r })
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		// A writer that comes and goes: the open waiting for one
		// returns, and the read finds the end.
		if fd, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
		<-errc
		t.Fatal("the stream waited for a writer of a FIFO that replaced a file")
	}
	r := <-results
	var msgs []string
	for _, e := range r.SrcErrors {
		msgs = append(msgs, e.Err.Error())
	}
	if r.Ack != nil {
		for _, e := range r.Ack.Errors {
			msgs = append(msgs, e.Msg)
		}
	}
	if !slices.ContainsFunc(msgs, func(m string) bool {
		return strings.Contains(m, "no longer a regular file") && strings.Contains(m, "f")
	}) {
		t.Errorf("errors %q, want the file reported as no longer a regular file", msgs)
	}
	if _, err := os.Lstat(filepath.Join(dst, "f")); err == nil {
		t.Errorf("f landed")
	}
}
