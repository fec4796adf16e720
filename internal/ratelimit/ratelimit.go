// Package ratelimit paces bytes to a rate: a token bucket shared by
// several goroutines, and a reader and a writer that draw from one.
package ratelimit

import (
	"io"
	"sync"
	"time"
)

// Bucket allows Rate bytes a second on average, with bursts of up to a
// tenth of a second's worth. A nil *Bucket allows everything.
type Bucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

// New returns a bucket of rate bytes a second; rate <= 0 means no limit (nil).
func New(rate int64) *Bucket {
	if rate <= 0 {
		return nil
	}
	return &Bucket{rate: float64(rate), last: time.Now()}
}

// Wait blocks until n bytes may pass.
func (b *Bucket) Wait(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	now := time.Now()
	b.tokens = min(b.tokens+now.Sub(b.last).Seconds()*b.rate, b.rate/10)
	b.last = now
	b.tokens -= float64(n)
	debt := -b.tokens
	b.mu.Unlock()
	if debt > 0 {
		time.Sleep(time.Duration(debt / b.rate * float64(time.Second)))
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
