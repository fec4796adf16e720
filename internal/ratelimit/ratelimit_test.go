package ratelimit

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"
)

// TestRate: 4 goroutines sharing a 1 MB/s bucket move 1 MB in about a second.
func TestRate(t *testing.T) {
	b := New(1 << 20)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(io.Discard, Reader(io.LimitReader(zero{}, 256<<10), b))
		}()
	}
	wg.Wait()
	if el := time.Since(start); el < 800*time.Millisecond || el > 1500*time.Millisecond {
		t.Errorf("1 MiB at 1 MiB/s took %v", el)
	}
}

func TestNoLimit(t *testing.T) {
	var buf bytes.Buffer
	if w := Writer(&buf, New(0)); w != io.Writer(&buf) {
		t.Error("a zero rate should not wrap the writer")
	}
}

type zero struct{}

func (zero) Read(p []byte) (int, error) { clear(p); return len(p), nil }
