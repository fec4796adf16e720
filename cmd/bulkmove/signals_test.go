package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/throttle"
)

// TestBwSignals: SIGUSR1 asks the job's bandwidth limit to halve, SIGUSR2
// to double, each named in the request.
func TestBwSignals(t *testing.T) {
	asks, stop := bwSignals()
	defer stop()
	for _, c := range []struct {
		sig  syscall.Signal
		want throttle.Request
	}{
		{syscall.SIGUSR1, throttle.Request{Op: throttle.Halve, Why: "SIGUSR1"}},
		{syscall.SIGUSR2, throttle.Request{Op: throttle.Double, Why: "SIGUSR2"}},
	} {
		if err := syscall.Kill(os.Getpid(), c.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-asks:
			if got != c.want {
				t.Errorf("after %v: got %+v, want %+v", c.sig, got, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no request after %v", c.sig)
		}
	}
}
