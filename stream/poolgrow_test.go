package stream_test

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
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream"
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
			source := stream.Source{Root: src}
			col := &collector{}
			def := &stream.Deferred{}
			walked := make(chan *sharder.Batch, 1024)
			if _, err := sharder.Run(ctx, src, sharder.Options{BatchFiles: 20, Deferred: def.Add}, walked); err != nil {
				t.Fatal(err)
			}
			// The batches come slowly, as from a walk, so that the job
			// lasts while streams come and go.
			batches := make(chan *sharder.Batch)
			go func() {
				defer close(batches)
				for b := range walked {
					batches <- b
					time.Sleep(2 * time.Millisecond)
				}
			}()
			var opened atomic.Int64
			pool := &stream.Pool{Conns: tr.open(t, ctx, 1, dst, source), OnResult: col.add, MaxConns: 5}
			pool.AddConn = func(ctx context.Context, i int) (stream.Conn, error) {
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
						if errors.Is(err, stream.ErrGrowClosed) {
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
