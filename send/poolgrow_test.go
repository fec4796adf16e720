package send_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
)

// TestAutoPoolGrowRetire: streams added and retired while the file data
// goes (-j auto) take their share, give back what they hold when retired,
// and leave nothing behind: every file lands once, the tree is whole, no
// goroutine is left.
func TestAutoPoolGrowRetire(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tr := range transports[:2] { // local and wire
		t.Run(tr.name, func(t *testing.T) {
			ctx := context.Background()
			dir := tmpDir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			if err := gentree.Mixed(src, 3000, 11); err != nil {
				t.Fatal(err)
			}
			source := source.Source{Root: src}
			col := &collector{}
			def := &send.Deferred{}
			walked := make(chan *model.Batch, 1024)
			if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 20, Deferred: def.Add}, walked); err != nil {
				t.Fatal(err)
			}
			// The batches come slowly, as from a walk, so that the job
			// lasts while streams come and go.
			batches := make(chan *model.Batch)
			go func() {
				defer close(batches)
				for b := range walked {
					batches <- b
					time.Sleep(2 * time.Millisecond)
				}
			}()
			var opened atomic.Int64
			pool := &send.Pool{Conns: tr.open(t, ctx, 1, dst, source), OnResult: col.add, MaxConns: 5}
			pool.AddConn = func(ctx context.Context, i int) (send.Conn, error) {
				opened.Add(1)
				return tr.open(t, ctx, 1, dst, source)[0], nil
			}
			var grown, retired int
			resized := make(chan struct{})
			go func() {
				defer close(resized)
				for step := 0; ; step++ {
					if step%3 == 2 {
						if pool.Retire() >= 0 {
							retired++
						}
					} else {
						n, err := pool.Grow(ctx, 2)
						if errors.Is(err, send.ErrGrowClosed) {
							return
						}
						if err != nil {
							t.Error(err)
						}
						grown += n
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			if err := pool.Run(ctx, batches, def); err != nil {
				t.Fatal(err)
			}
			<-resized
			if grown == 0 || retired == 0 {
				t.Fatalf("%d streams added, %d retired: the job was too short to test", grown, retired)
			}
			if n := len(pool.Stats()); n != 1+grown || n > 5 {
				t.Errorf("%d streams in the stats, want 1 + %d added, at most 5", n, grown)
			}
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			// Hard-link targets are offered again to the stream that links
			// them when the one that wrote them was retired: those second
			// results are not from the queue.
			queued := &collector{}
			for _, r := range col.results {
				if r.Batch.ID < 1<<62 {
					queued.add(r)
				}
			}
			for p, n := range queued.done() {
				if n != 1 {
					t.Errorf("%s reported in place %d times", p, n)
				}
			}
			var busy int
			for _, s := range pool.Stats()[1:] {
				if s.Files > 0 {
					busy++
				}
			}
			if busy == 0 {
				t.Error("no added stream carried a file")
			}
			treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
			t.Log(fmt.Sprintf("%d added (%d opened), %d retired", grown, opened.Load(), retired))
		})
	}
}

// TestPoolRunning: Grow adds no stream before Run has its streams running
// (-j auto's first step over a far path, taken at once, lost it when it
// came that early); Running says when it may, and Grow then adds, up to
// MaxConns: none where it is not set (it panicked on the streams'
// counters, sized when Run starts).
func TestPoolRunning(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, c := range []struct{ max, want int }{{3, 1}, {0, 0}} {
		t.Run(fmt.Sprintf("MaxConns=%d", c.max), func(t *testing.T) { testPoolRunning(t, c.max, c.want) })
	}
}

func testPoolRunning(t *testing.T, maxConns, want int) {
	ctx := context.Background()
	tr := transports[0] // local
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	source := source.Source{Root: src}
	col := &collector{}
	pool := &send.Pool{Conns: tr.open(t, ctx, 1, dst, source), OnResult: col.add, MaxConns: maxConns}
	pool.AddConn = func(ctx context.Context, i int) (send.Conn, error) {
		return tr.open(t, ctx, 1, dst, source)[0], nil
	}
	if n, err := pool.Grow(ctx, 1); n != 0 || err != nil {
		t.Fatalf("Grow before Run: %d, %v; want 0, nil", n, err)
	}
	select {
	case <-pool.Running():
		t.Fatal("Running is closed before Run")
	default:
	}
	def := &send.Deferred{}
	walked := make(chan *model.Batch, 16)
	if _, err := sharder.Run(ctx, src, sharder.Options{Deferred: def.Add}, walked); err != nil {
		t.Fatal(err)
	}
	batches := make(chan *model.Batch)
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx, batches, def) }()
	select {
	case <-pool.Running():
	case <-time.After(10 * time.Second):
		t.Fatal("Running not closed once Run runs")
	}
	if n, err := pool.Grow(ctx, 1); n != want || err != nil {
		t.Errorf("Grow once running: %d, %v; want %d, nil", n, err, want)
	}
	for b := range walked {
		batches <- b
	}
	close(batches)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	<-pool.Running() // still closed
	if b, err := os.ReadFile(filepath.Join(dst, "f")); err != nil || string(b) != "data" {
		t.Errorf("f: %q, %v", b, err)
	}
}

// TestPoolJoin: the streams a transport is still connecting (Pool.Join)
// do not hold the first batch back: it is acknowledged over the stream
// that is up while they connect; once up they take their share, and they
// are the job's own (never retired, so Retire finds none).
func TestPoolJoin(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	tr := transports[1] // wire
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Mixed(src, 400, 3); err != nil {
		t.Fatal(err)
	}
	source := source.Source{Root: src}
	col := &collector{}
	release := make(chan struct{})
	acked := make(chan struct{})
	var once atomic.Bool
	pool := &send.Pool{Conns: tr.open(t, ctx, 1, dst, source), Join: 3, OnResult: func(r send.Result) {
		col.add(r)
		if r.Ack != nil && once.CompareAndSwap(false, true) {
			close(acked)
		}
	}}
	var joined atomic.Int64
	pool.AddConn = func(ctx context.Context, i int) (send.Conn, error) {
		select { // a handshake over a long path: until the first batch is in
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		joined.Add(1)
		return tr.open(t, ctx, 1, dst, source)[0], nil
	}
	def := &send.Deferred{}
	walked := make(chan *model.Batch, 1024)
	if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 10, Deferred: def.Add}, walked); err != nil {
		t.Fatal(err)
	}
	// The walk hands out one batch, and the rest once the streams joined.
	batches := make(chan *model.Batch)
	rest := make(chan struct{})
	go func() {
		defer close(batches)
		batches <- <-walked
		<-rest
		for b := range walked {
			batches <- b
		}
	}()
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx, batches, def) }()
	select {
	case <-acked:
	case <-time.After(20 * time.Second):
		t.Fatal("no batch acknowledged while the other streams connect")
	}
	if n := joined.Load(); n != 0 {
		t.Fatalf("%d streams joined before the first acknowledgement", n)
	}
	close(release)
	for deadline := time.Now().Add(20 * time.Second); len(pool.Stats()) < 4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams after the others connected, want 1 + 3 joined", len(pool.Stats()))
		}
	}
	if pool.Retire() >= 0 {
		t.Error("Retire retired a stream the job joined")
	}
	close(rest)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	var busy int
	for _, s := range pool.Stats()[1:] {
		if s.Files > 0 {
			busy++
		}
	}
	if busy == 0 {
		t.Error("no joined stream carried a file")
	}
	if errs := col.errors(); len(errs) > 0 {
		t.Fatalf("errors: %q", errs)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
}
