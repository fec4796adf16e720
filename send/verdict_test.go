package send_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// TestVerdictScenarios throttles, in turn, the source reader, the link and
// the receiver's writes of a real two-stream transfer over the wire, and
// checks that the bottleneck verdict names each.
func TestVerdictScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("three transfers of a few seconds each")
	}
	const rate = 4 << 20 // bytes a second, in each scenario
	cases := []struct {
		name                 string
		source, link, writes int64
		want                 string
	}{
		{"slow source disk", rate, 0, 0, metrics.SourceRead},
		{"slow link", 0, rate, 0, metrics.Network},
		{"slow destination disk", 0, 0, rate, metrics.ReceiverWrite},
	}
	dir := tmpDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Small(src, 600, 12, 24<<10); err != nil { // 14 MiB: about 3.5 s at the rate
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dst := filepath.Join(dir, fmt.Sprint("dst-", c.want))
			link := ratelimit.New(c.link)
			source := source.Source{Root: src, Limit: ratelimit.New(c.source)}
			var conns []send.Conn
			for i := range 2 {
				toAgentR, toAgentW := io.Pipe()
				fromAgentR, fromAgentW := io.Pipe()
				done := make(chan struct{})
				go func() {
					defer close(done)
					receive.Serve(ctx, toAgentR, fromAgentW, dst, "test")
					fromAgentW.CloseWithError(io.EOF)
					toAgentR.Close()
				}()
				t.Cleanup(func() { toAgentW.Close(); <-done })
				cl, err := send.Dial(ctx, fmt.Sprint("stream ", i), fromAgentR, ratelimit.Writer(toAgentW, link), closers{toAgentW, fromAgentR},
					"test", wire.ReceiveOptions{Owner: os.Geteuid() == 0, WriteRate: c.writes}, source)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, cl)
			}
			job := metrics.NewJob(2)
			go job.Watch(ctx, 100*time.Millisecond, time.Second, false, nil)
			// Sample the verdict while the transfer runs, after its first second.
			seen := map[string]int{}
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				time.Sleep(1200 * time.Millisecond)
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if v := job.Verdict(); v != nil && job.Active() > 0 {
							seen[v.Resource]++
						}
					}
				}
			}()
			def := &send.Deferred{}
			batches := make(chan *model.Batch, 64)
			go sharder.Run(ctx, src, sharder.Options{BatchFiles: 20, Deferred: def.Add}, batches)
			pool := &send.Pool{Conns: conns, Counters: job.Streams}
			if err := pool.Run(ctx, batches, def); err != nil {
				t.Fatal(err)
			}
			close(stop)
			<-sampled
			best, n, total := "", 0, 0
			for r, k := range seen {
				total += k
				if k > n {
					best, n = r, k
				}
			}
			if best != c.want || n*2 < total {
				t.Errorf("verdicts while running: %v, want mostly %s", seen, c.want)
			}
			if v := job.Verdict(); v != nil {
				t.Logf("last verdict: %s (%s) shares %v", v.Resource, v.Why, v.Shares)
			}
		})
	}
}
