// Package ratelimit paces bytes to a rate: a token bucket shared by
// several goroutines, and a reader and a writer that draw from one.
//
// The rate of a bucket can change while streams draw from it (SetRate),
// by hand or on a timetable (ParseSchedule, Schedule.Run). A timetable's
// rates are read by internal/units (ParseRate), as rsync and rclone take
// them ("50M", "1.5G", "off").
package ratelimit

import (
	"io"
	"sync"
	"time"
)

// Bucket allows Rate bytes a second on average, with bursts of up to a
// tenth of a second's worth. A nil *Bucket allows everything.
//
// Callers are served in the order they call Wait: each call takes a place
// in line for its n bytes and returns once the bucket has let through the
// bytes of every call before it and its own. A stream that waits again
// goes to the back of the line, so streams that draw in chunks of the
// same size share the rate evenly and none starves.
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // bytes a second; 0: no limit
	tokens float64 // bytes that may pass now; negative: what the line owes
	last   time.Time
	queued int64         // bytes asked for by every Wait so far
	wake   chan struct{} // closed, and replaced, when the rate changes
}

// New returns a bucket of rate bytes a second; rate <= 0 means no limit (nil).
// Use NewAdjustable for a bucket whose rate may be set later.
func New(rate int64) *Bucket {
	if rate <= 0 {
		return nil
	}
	return NewAdjustable(rate)
}

// NewAdjustable returns a bucket of rate bytes a second, or without a
// limit if rate <= 0. Unlike New it never returns nil, so SetRate can
// limit it (again) later.
func NewAdjustable(rate int64) *Bucket {
	return &Bucket{rate: float64(max(rate, 0)), last: time.Now(), wake: make(chan struct{})}
}

// SetRate changes the rate to bytesPerSec bytes a second; <= 0 lifts the
// limit, which a later SetRate may put back. Calls blocked in Wait see the
// new rate at once: lifting the limit lets them all through, and a new
// rate pays what they still owe at that rate from now on. What the bucket
// let through before stays counted. b must not be nil.
func (b *Bucket) SetRate(bytesPerSec int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	b.rate = float64(max(bytesPerSec, 0))
	if b.rate == 0 {
		b.tokens = 0
	} else {
		b.tokens = min(b.tokens, b.rate/10)
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

// Rate returns the rate in bytes a second; 0 means no limit.
func (b *Bucket) Rate() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.rate)
}

// refill adds the tokens earned since the last call; b.mu is held.
func (b *Bucket) refill(now time.Time) {
	if b.rate > 0 {
		b.tokens = min(b.tokens+now.Sub(b.last).Seconds()*b.rate, b.rate/10)
	}
	b.last = now
}

// Wait blocks until n bytes may pass.
func (b *Bucket) Wait(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	if b.rate == 0 {
		b.queued += int64(n)
		return
	}
	b.tokens -= float64(n)
	b.queued += int64(n)
	place := b.queued // this call may go once the bucket has let through this many bytes
	for {
		// The bytes asked for after this call are owed too, but not by it.
		owed := -b.tokens - float64(b.queued-place)
		if b.rate == 0 || owed <= 0 {
			return
		}
		t := time.NewTimer(time.Duration(owed / b.rate * float64(time.Second)))
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		b.mu.Lock()
		b.refill(time.Now())
	}
}

// Reader paces reads from r.
func Reader(r io.Reader, b *Bucket) io.Reader {
	if b == nil {
		return r
	}
	return &reader{r, b}
}

type reader struct {
	r io.Reader
	b *Bucket
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.b.Wait(n)
	return n, err
}

// Writer paces writes to w.
func Writer(w io.Writer, b *Bucket) io.Writer {
	if b == nil {
		return w
	}
	return &writer{w, b}
}

type writer struct {
	w io.Writer
	b *Bucket
}

func (w *writer) Write(p []byte) (int, error) {
	w.b.Wait(len(p))
	return w.w.Write(p)
}
