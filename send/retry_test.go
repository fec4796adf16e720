package send_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

type permErr struct{}

func (permErr) Error() string   { return "auth failed" }
func (permErr) Permanent() bool { return true }

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("box2 stream 1: %w", syscall.ECONNRESET), true},
		{&net.OpError{Op: "read", Err: syscall.ETIMEDOUT}, true},
		{fmt.Errorf("x: %w", send.ErrStalled), true},
		{errors.New("connection closed by the receiver"), true},
		{fmt.Errorf("x: %w", wire.ErrVersion), false},
		{fmt.Errorf("x: %w", wire.ErrProtocol), false},
		{fmt.Errorf("x: %w", send.ErrNoSpace), false},
		{fmt.Errorf("write: %w", syscall.ENOSPC), false},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, false},
		{permErr{}, false},
		{send.Permanent(io.EOF), false},
		{&send.RemoteError{Msg: "disk on fire"}, false},
		{fmt.Errorf("box2 stream 0: handshake: %w", &wire.RefusedError{Reason: "connection closed: wrong token"}), false},
		{context.Canceled, false},
		{errors.New("something else"), false},
	} {
		if got := send.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// stallPipe passes bytes through until stalled, then blocks (a silent
// peer) until closed.
type stallPipe struct {
	r       *io.PipeReader
	w       *io.PipeWriter
	stalled atomic.Bool
}

// TestStallDetected: a connection that stops moving bytes while batches
// are in flight is closed after StallTimeout, with ErrStalled, a retryable
// error.
func TestStallDetected(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	dir := tmpDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := gentree.Small(src, 200, 2, 100<<10); err != nil {
		t.Fatal(err)
	}
	// sender -> relay -> agent; the relay stops forwarding when told.
	toRelayR, toRelayW := io.Pipe()
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	var stall atomic.Bool
	go func() {
		buf := make([]byte, 32<<10)
		for {
			for stall.Load() {
				time.Sleep(10 * time.Millisecond)
				if _, err := toRelayR.Read(nil); err != nil {
					toAgentW.Close()
					return
				}
			}
			n, err := toRelayR.Read(buf)
			if err != nil {
				toAgentW.CloseWithError(err)
				return
			}
			toAgentW.Write(buf[:n])
		}
	}()
	served := make(chan error, 1)
	go func() {
		served <- receive.Serve(ctx, toAgentR, fromAgentW, dst, "test")
		fromAgentW.Close()
		toAgentR.Close()
	}()
	c, err := send.Dial(ctx, "s0", fromAgentR, toRelayW, closers{toRelayW, fromAgentR, toRelayR}, "test",
		wire.ReceiveOptions{Check: "quick"}, source.Source{Root: src})
	if err != nil {
		t.Fatal(err)
	}
	c.StallTimeout = 300 * time.Millisecond
	stall.Store(true)
	batches := make(chan *model.Batch, 64)
	go func() {
		sharder.Run(ctx, src, sharder.Options{BatchFiles: 20, Deferred: func(model.Entry) {}}, batches)
	}()
	start := time.Now()
	unacked, err := c.Run(ctx, batches, func(send.Result) {})
	if !errors.Is(err, send.ErrStalled) || !send.Retryable(err) {
		t.Fatalf("Run: %v, want a retryable ErrStalled", err)
	}
	if el := time.Since(start); el > 15*time.Second { // unnoticed, it would never end
		t.Errorf("the stall took %s to be noticed (timeout 300ms)", el)
	}
	if len(unacked) == 0 {
		t.Errorf("no batch given back")
	}
	<-served
	for range batches {
	}
}
