package engine

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// interrupts handles SIGINT and SIGTERM for a job: the first closes drain
// (no new batch starts; those in flight finish) and, grace later, cancels
// the context; a second cancels it at once. Files are only ever linked
// into place whole, so even the hard stop leaves nothing half-written
// under a final name; the journal keeps what was acknowledged.
func (j *job) interrupts(parent context.Context, grace time.Duration) (ctx context.Context, drain <-chan struct{}, stop func()) {
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
		j.interrupted.Store(true)
		close(d)
		termsafe.Errorf(j.stderr, "interrupted: finishing the batches in flight (up to %s); interrupt again to stop at once", grace)
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
