package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// interrupts handles SIGINT and SIGTERM for a job: the first closes drain
// (engine.Job.Drain: no new batch starts; those in flight finish), says so
// on stderr and, grace later, cancels the context; a second cancels it at
// once. Files are only ever linked into place whole, so even the hard
// stop leaves nothing half-written under a final name; the journal keeps
// what was acknowledged.
func interrupts(parent context.Context, grace time.Duration, stderr io.Writer) (ctx context.Context, drain <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	d := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		close(d)
		termsafe.Errorf(stderr, "interrupted: finishing the batches in flight (up to %s); interrupt again to stop at once", grace)
		select {
		case <-sigs:
		case <-time.After(grace):
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, d, func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
}

// bwSignals takes SIGUSR1 and SIGUSR2 from now on (they would end the
// process otherwise) and turns them into requests to halve and double
// the job's bandwidth limit (engine.Job.Limit), which wait in the channel
// until the job's limit runs; stop gives the signals back.
func bwSignals() (asks <-chan throttle.Request, stop func()) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	out := make(chan throttle.Request, cap(sigs))
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var s os.Signal
			select {
			case s = <-sigs:
			case <-quit:
				return
			}
			r := throttle.Request{Op: throttle.Halve, Why: "SIGUSR1"}
			if s == syscall.SIGUSR2 {
				r = throttle.Request{Op: throttle.Double, Why: "SIGUSR2"}
			}
			select {
			case out <- r:
			default: // as many wait as signals would: the rest are dropped
			}
		}
	}()
	return out, func() {
		signal.Stop(sigs)
		close(quit)
		<-done
	}
}
