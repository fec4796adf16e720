package send_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/internal/faultproxy"
	"github.com/bulkmove/bulkmove/internal/hostcpu"
	"github.com/bulkmove/bulkmove/internal/treecmp"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/compress"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// Tree contents for compressTree.
const (
	contentRandom = iota // random bytes: do not compress
	contentHalf          // each file random bytes, then as many of text: compress to about half
	contentText          // text: compress well
)

// compressTree writes files of log-normal sizes (median 24 KiB, up to
// 1 MiB) until about total bytes, of the given content, into dir.
func compressTree(t *testing.T, dir string, content int, total int64) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(content)+1, 7))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while request served status ok error retry " +
		"connection user id time latency bytes path GET POST handler cache miss hit")
	text := func(b []byte) {
		var s strings.Builder
		for line := 0; s.Len() < len(b); line++ {
			fmt.Fprintf(&s, "2024-01-%02d 12:%02d:%02d.%03d [%d] ", line%28+1, line%60, (line*7)%60, r.IntN(1000), r.IntN(97))
			for range 8 {
				s.WriteString(words[r.IntN(len(words))])
				s.WriteByte(' ')
			}
			fmt.Fprintf(&s, "%d\n", r.IntN(100000))
		}
		copy(b, s.String())
	}
	random := func(b []byte) {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	var sum int64
	for i := 0; sum < total; i++ {
		size := int(min(math.Exp(math.Log(24<<10)+1.2*r.NormFloat64()), 1<<20)) + 1
		b := make([]byte, size)
		switch content {
		case contentRandom:
			random(b)
		case contentHalf:
			random(b[:size/2])
			text(b[size/2:])
		case contentText:
			text(b)
		}
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%16), fmt.Sprintf("f%05d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum += int64(size)
	}
}

// cappedLink serves agents on root in this process behind a proxy that
// caps them at rate bytes a second together, and returns how to open a
// stream to one over it (loopback TCP, content hashes on).
func cappedLink(t *testing.T, ctx context.Context, root string, rate int64) func(name string, src source.Source) (*send.Client, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var agents sync.WaitGroup
	agents.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			agents.Go(func() {
				receive.Serve(ctx, c, c, root, "test")
				c.Close()
			})
		}
	})
	p, err := faultproxy.Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p.Rate(rate)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.Close()
		ln.Close()
		agents.Wait()
	})
	return func(name string, src source.Source) (*send.Client, error) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return nil, err
		}
		// A link that buffers 128 KiB (loopback's own buffers grow to
		// megabytes, more than these trees' first batches).
		c.(*net.TCPConn).SetWriteBuffer(128 << 10)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return send.Dial(ctx, name, c, c, c, "test", wire.ReceiveOptions{Owner: os.Geteuid() == 0, Check: "quick"}, src)
	}
}

// firstPlain bounds what a stream sends plain over a slow link before it
// compresses: its first batch (Pool.Opening, 256 KiB here), which the
// link's buffers take before its writes wait, and the two batches (512
// KiB) that may be on their way behind it when the link first holds it
// back. The job's two first streams open plain; the two added start
// compressed: together at most 2 × firstPlain go plain.
//
// Under the race detector neither is asserted, only that compression
// engaged: the detector makes compressing many times as costly, and a
// stream that finds itself CPU-bound rightly sends probes plain (the
// policy weighs the cost it measures). How much goes plain then depends
// on how loaded the machine is, which says nothing of the policy.
var firstPlain = int64(256<<10 + 2*512<<10)

func init() {
	if raceEnabled {
		firstPlain = 1 << 40
	}
}

// TestCompressCappedLink: --compress auto over a link capped at 2 MB/s
// (a real TCP connection through a capped proxy), on trees of three kinds:
// text, and files half random half text, go compressed on every stream
// once its first batches fill the link's buffers (firstPlain), streams added on the way start compressed (the job's
// decision, once one compresses), and random data goes plain; no stream changes its mind
// more than a few times. Asserted on what went compressed, not on time.
func TestCompressCappedLink(t *testing.T) {
	defer goleak.VerifyNone(t)
	// This host's CPUs taken as idle: the machine running the tests may
	// be busy with others, which is no slow link's business here.
	send.SetHostCPU(t, func() (hostcpu.Snapshot, bool) { return hostcpu.Snapshot{}, false })
	for _, tc := range []struct {
		name    string
		content int
		size    int64
	}{{"text", contentText, 8 << 20}, {"half and half", contentHalf, 6 << 20}, {"random", contentRandom, 3 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := tmpDir(t)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			compressTree(t, src, tc.content, tc.size)
			var log lines
			var share compress.AutoShare
			dial := cappedLink(t, ctx, dst, 2e6)
			var mu sync.Mutex
			clients := map[int]*send.Client{}
			open := func(i int) (send.Conn, error) {
				c, err := dial(fmt.Sprintf("stream %d", i), source.Source{Root: src})
				if err != nil {
					return nil, err
				}
				c.Compress, c.Logf, c.Share = compress.Config{Mode: compress.Auto}, log.logf, &share
				mu.Lock()
				clients[i] = c
				mu.Unlock()
				return c, nil
			}
			var conns []send.Conn
			for i := range 2 {
				c, err := open(i)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			var grew atomic.Bool
			p, col := moveWith(t, ctx, src, conns, sharder.Options{BatchBytes: 512 << 10}, nil, func(p *send.Pool) {
				p.Opening = 256 << 10 // as the engine's openingCost, scaled to the link
				p.AddConn, p.MaxConns = func(ctx context.Context, i int) (send.Conn, error) { return open(i) }, 4
				done := p.OnResult
				p.OnResult = func(r send.Result) {
					done(r)
					if s := sum(p); (s.in > 0 || s.sent > tc.size/6) && !grew.Swap(true) {
						go p.Grow(ctx, 2)
					}
				}
			})
			if errs := col.errors(); len(errs) > 0 {
				t.Fatalf("errors: %q", errs)
			}
			treecmp.Equal(t, src, dst, treecmp.Options{Owner: os.Geteuid() == 0})
			s := sum(p)
			t.Logf("files %d bytes, wire %d; compressed %d -> %d\n%s", s.sent, s.wire, s.in, s.out, log.String())
			mu.Lock()
			defer mu.Unlock()
			if len(clients) < 3 {
				t.Fatalf("%d streams: none added", len(clients))
			}
			for i := range len(clients) {
				c := clients[i]
				st := p.Counters[i]
				onOff, levels := c.Flips()
				t.Logf("%s: files %d bytes, compressed %d -> %d; turned on or off %d times, level changed %d times",
					c.Name, st.BytesSent.Load(), st.CompressIn.Load(), st.CompressOut.Load(), onOff, levels)
				if onOff > 2 || levels > 3 {
					t.Errorf("%s turned compression on or off %d times, changed its level %d times", c.Name, onOff, levels)
				}
				sent, in := st.BytesSent.Load(), st.CompressIn.Load()
				switch {
				case tc.content == contentRandom && in > sent/100:
					t.Errorf("%s compressed %d bytes of random data (of %d)", c.Name, in, sent)
				case tc.content != contentRandom && sent-in > firstPlain:
					// Only its first batches, until the link held it back.
					t.Errorf("%s compressed %d bytes of %d: %d went plain", c.Name, in, sent, sent-in)
				}
				if i >= 2 && tc.content != contentRandom && sent > 0 && !strings.Contains(log.String(), c.Name+": compression on: the job's other streams compress") {
					t.Errorf("%s, added, did not start compressed", c.Name)
				}
			}
			if added := p.Counters[2].BytesSent.Load() + p.Counters[3].BytesSent.Load(); tc.content != contentRandom && added == 0 {
				t.Errorf("the streams added sent nothing")
			}
			switch {
			case tc.content == contentRandom:
			case raceEnabled && s.in == 0:
				t.Errorf("nothing compressed of %d bytes", s.sent)
			case s.sent-s.in > 2*firstPlain:
				t.Errorf("compressed %d bytes of %d: %d went plain, want at most %d (the first batches of the two first streams)", s.in, s.sent, s.sent-s.in, 2*firstPlain)
			}
		})
	}
}
