package send_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
	"go.uber.org/goleak"
)

// TestClientBrokenStreams adds to TestClientBadAcks what an agent may send
// that is not a frame at all: an oversized or garbled frame, a stream cut
// mid-frame (then closed, or left silent), a hang-up. The sender fails
// with what it got, counts nothing done, and does not hang: a silent peer
// is caught by the stall timeout.
func TestClientBrokenStreams(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name   string
		raw    []byte // written when the first manifest arrives
		silent bool   // then stay open and silent (else close)
		proto  bool   // a protocol error
		want   string
	}{
		{"oversized frame", []byte{wire.Ack, 0xff, 0xff, 0xff, 0xff}, true, true, "limit"},
		{"garbled need", []byte{wire.Need, 0, 0, 0, 3, 0xff, 0xff, 0xff}, true, true, ""},
		{"cut mid-frame, closed", []byte{wire.Need, 0, 0, 0, 9, 1}, false, false, ""},
		{"cut mid-frame, silent", []byte{wire.Need, 0, 0, 0, 9, 1}, true, false, "stalled"},
		{"hang-up", nil, false, false, "closed"},
		{"batch in place out of turn", []byte{wire.Skipped, 0, 0, 0, 1, 99}, true, true, "out of turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, batches := srcTree(t, "a", "b")
			c, err, agentDone := dialFake(t, src, func(a *fakeAgent) {
				if a.hello(wire.Handshake{Proto: wire.Proto, Version: "fake"}) != nil {
					return
				}
				if typ, _, err := wire.ReadFrame(a.fromClient); err != nil || typ != wire.Manifest {
					return
				}
				a.toClient.Write(tc.raw)
				if tc.silent {
					a.drain()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			c.StallTimeout = 500 * time.Millisecond
			in := make(chan *model.Batch, len(batches))
			for _, b := range batches {
				in <- b
			}
			close(in)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := 0
			_, err = c.Run(ctx, in, func(send.Result) { done++ })
			c.Abort()
			<-agentDone
			if ctx.Err() != nil {
				t.Fatal("the sender hung")
			}
			if err == nil {
				t.Fatal("Run: nil error")
			}
			if tc.proto && !errors.Is(err, wire.ErrProtocol) {
				t.Errorf("Run: %v, want a protocol error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %q does not say %q", err, tc.want)
			}
			if done > 0 {
				t.Errorf("%d batches counted done", done)
			}
		})
	}
}

// A hostile agent sends acks of 8 MiB, forty of them, while the sender is
// busy elsewhere (here: it takes none): the sender holds a bounded queue of
// them, not all forty.
func TestAttackAgentFloodsAcks(t *testing.T) {
	const size, count = 8 << 20, 40
	base := heapAlloc()
	sent := make(chan int, 1)
	c, err, _ := dialFake(t, source.Source{}, func(a *fakeAgent) {
		if a.hello(wire.Handshake{Proto: wire.Proto, Version: "hostile"}) != nil {
			return
		}
		go a.drain()
		p := make([]byte, size)
		n := 0
		defer func() { sent <- n }()
		for ; n < count; n++ {
			if wire.WriteFrame(a.toClient, wire.Ack, p) != nil {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Until the agent has sent them all, or the sender stopped reading.
	var grown int64
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		if grown = int64(heapAlloc()) - int64(base); grown > 128<<20 || len(sent) > 0 {
			break
		}
	}
	c.Abort()
	n := <-sent
	t.Logf("the agent sent %d acks of %d MiB; the sender's heap grew by %d MiB", n, size>>20, grown>>20)
	if grown > 48<<20 {
		t.Errorf("the sender's heap grew by %d MiB with acks queued, want at most 48 MiB (16 MiB queued, a frame held, a frame read, the agent's)", grown>>20)
	}
}

// heapAlloc is the heap in use after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
