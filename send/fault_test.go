package send_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport/local"
)

// flaky is a stream that breaks (a cut connection) after moving `after`
// batches, or at every batch whose id poison says.
type flaky struct {
	send.Conn
	after  int
	poison func(id uint64) bool
	n      int
}

func (f *flaky) Run(ctx context.Context, in <-chan *model.Batch, done func(send.Result)) ([]*model.Batch, error) {
	return runEach(ctx, f.Conn, in, done, func(b *model.Batch) error {
		if f.n >= f.after || f.poison != nil && f.poison(b.ID) {
			return io.ErrUnexpectedEOF
		}
		f.n++
		return nil
	})
}

// runEach runs c on the batches of in one at a time, calling before first
// for each: an error from it stops the stream, that batch unacknowledged.
func runEach(ctx context.Context, c send.Conn, in <-chan *model.Batch, done func(send.Result), before func(*model.Batch) error) ([]*model.Batch, error) {
	for {
		var b *model.Batch
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case x, ok := <-in:
			if !ok {
				return nil, nil
			}
			b = x
		}
		if err := before(b); err != nil {
			return []*model.Batch{b}, err
		}
		one := make(chan *model.Batch, 1)
		one <- b
		close(one)
		if _, err := c.Run(ctx, one, done); err != nil {
			return nil, err
		}
	}
}

type faultCase struct {
	dir, src, dst string
	recv          *extract.Receiver
}

func newFaultCase(t *testing.T) *faultCase {
	t.Helper()
	dir := tmpDir(t)
	fc := &faultCase{dir: dir, src: filepath.Join(dir, "src"), dst: filepath.Join(dir, "dst")}
	if err := gentree.Mixed(fc.src, 1500, 5); err != nil {
		t.Fatal(err)
	}
	recv, err := extract.Open(fc.dst, extract.Options{Owner: os.Geteuid() == 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Close() })
	fc.recv = recv
	return fc
}

func (fc *faultCase) local() send.Conn {
	return &local.Conn{Recv: fc.recv, Src: source.Source{Root: fc.src}}
}

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) add(m string) { w.mu.Lock(); w.msgs = append(w.msgs, m); w.mu.Unlock() }
func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

// TestStreamLostAndReconnected: a stream that breaks gives its batches back
// to the queue and comes back through Redial; nothing is lost.
func TestStreamLostAndReconnected(t *testing.T) {
	defer goleak.VerifyNone(t)
	fc := newFaultCase(t)
	var warn warnings
	var redials atomic.Int32
	conns := []send.Conn{fc.local(), &flaky{Conn: fc.local(), after: 2}, &flaky{Conn: fc.local(), after: 0}}
	_, col := moveWith(t, context.Background(), fc.src, conns, sharder.Options{BatchFiles: 50}, nil, func(p *send.Pool) {
		p.OnWarn = warn.add
		p.Redial = func(ctx context.Context, i int) (send.Conn, error) {
			if redials.Add(1) == 1 {
				return nil, io.ErrUnexpectedEOF // the first try fails too: back off
			}
			return fc.local(), nil
		}
	})
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	treecmp.Equal(t, fc.src, fc.dst, treecmp.Options{Owner: os.Geteuid() == 0})
	if w := warn.String(); !strings.Contains(w, "stream 1 lost") || !strings.Contains(w, "reconnected") {
		t.Errorf("warnings do not tell of the lost and reconnected streams:\n%s", w)
	}
}

// TestStreamLostNoRedial: without Redial, the other streams take over.
func TestStreamLostNoRedial(t *testing.T) {
	defer goleak.VerifyNone(t)
	fc := newFaultCase(t)
	conns := []send.Conn{&flaky{Conn: fc.local(), after: 1}, fc.local(), &flaky{Conn: fc.local(), after: 3}}
	_, col := move(t, context.Background(), fc.src, conns, sharder.Options{BatchFiles: 50}, nil)
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	treecmp.Equal(t, fc.src, fc.dst, treecmp.Options{Owner: os.Geteuid() == 0})
}

// TestNoStreamLeft: when every stream fails for good, the job fails and
// says so, without hanging.
func TestNoStreamLeft(t *testing.T) {
	defer goleak.VerifyNone(t)
	fc := newFaultCase(t)
	conns := []send.Conn{&flaky{Conn: fc.local(), after: 1}, &flaky{Conn: fc.local(), after: 0}}
	def := &send.Deferred{}
	batches := make(chan *model.Batch, 1024)
	if _, err := sharder.Run(context.Background(), fc.src, sharder.Options{BatchFiles: 50, Deferred: def.Add}, batches); err != nil {
		t.Fatal(err)
	}
	pool := &send.Pool{Conns: conns, ReconnectTimeout: 300 * time.Millisecond,
		Redial: func(ctx context.Context, i int) (send.Conn, error) { return nil, io.ErrUnexpectedEOF }}
	done := make(chan error, 1)
	go func() { done <- pool.Run(context.Background(), batches, def) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no stream can make progress") {
			t.Fatalf("Run: %v, want no stream can make progress", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run hangs with every stream down")
	}
}

// TestPoisonBatch: a batch that breaks every stream it goes to fails the
// job after Retries attempts, naming it.
func TestPoisonBatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	fc := newFaultCase(t)
	poison := func(id uint64) bool { return id == 3 }
	conns := []send.Conn{&flaky{Conn: fc.local(), after: 1 << 30, poison: poison}, &flaky{Conn: fc.local(), after: 1 << 30, poison: poison}}
	def := &send.Deferred{}
	batches := make(chan *model.Batch, 1024)
	if _, err := sharder.Run(context.Background(), fc.src, sharder.Options{BatchFiles: 50, Deferred: def.Add}, batches); err != nil {
		t.Fatal(err)
	}
	pool := &send.Pool{Conns: conns, Retries: 3, Redial: func(ctx context.Context, i int) (send.Conn, error) {
		return &flaky{Conn: fc.local(), after: 1 << 30, poison: poison}, nil
	}}
	err := pool.Run(context.Background(), batches, def)
	if err == nil || !strings.Contains(err.Error(), "batch #3") || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Run: %v, want batch #3 named with the cause", err)
	}
}

// TestDrain: once Drain is closed no new batch starts, the ones in flight
// finish (acknowledged, so a journal keeps them), directory metadata waits
// for the next run, and Run returns without error.
func TestDrain(t *testing.T) {
	defer goleak.VerifyNone(t)
	fc := newFaultCase(t)
	drain := make(chan struct{})
	var acked atomic.Int32
	var once sync.Once
	conns := []send.Conn{fc.local(), fc.local()}
	def := &send.Deferred{}
	batches := make(chan *model.Batch, 1024)
	if _, err := sharder.Run(context.Background(), fc.src, sharder.Options{BatchFiles: 20, Deferred: def.Add}, batches); err != nil {
		t.Fatal(err)
	}
	total := len(batches)
	pool := &send.Pool{Conns: conns, Drain: drain, OnResult: func(r send.Result) {
		if !r.Final && acked.Add(1) == 3 {
			once.Do(func() { close(drain) })
		}
	}}
	if err := pool.Run(context.Background(), batches, def); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := int(acked.Load()); n < 3 || n >= total {
		t.Errorf("%d of %d batches acknowledged after the drain at 3, want a few more than 3 at most", n, total)
	}
	// Directory metadata is not applied: the root keeps the mtime the
	// writes gave it, not the source's.
	sfi, _ := os.Stat(fc.src)
	dfi, _ := os.Stat(fc.dst)
	if sfi.ModTime().Equal(dfi.ModTime()) {
		t.Errorf("directory metadata applied after a drain")
	}
}
