package ratelimit

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// draw has g goroutines call b.Wait with random chunks of 1 byte to 64 KiB
// for d, and returns the bytes each let through and the time from the
// start until the last Wait returned. change, if not nil, runs alongside.
func draw(b *Bucket, g int, d time.Duration, change func()) ([]int64, time.Duration) {
	got := make([]int64, g)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			for time.Since(start) < d {
				n := 1 + rand.IntN(64<<10)
				b.Wait(n)
				got[i] += int64(n)
			}
		})
	}
	if change != nil {
		change()
	}
	wg.Wait()
	return got, time.Since(start)
}

func sum(s []int64) (t int64) {
	for _, v := range s {
		t += v
	}
	return t
}

// TestShared: 4 goroutines drawing random chunks from one 20 MB/s bucket
// for 2 s get 20 MB/s between them, within 5%, and each about a quarter.
func TestShared(t *testing.T) {
	const rate = 20e6
	got, el := draw(NewAdjustable(rate), 4, 2*time.Second, nil)
	total := sum(got)
	if want := rate * el.Seconds(); float64(total) < 0.95*want || float64(total) > 1.05*want {
		t.Errorf("%d bytes in %v: %.0f B/s, want %v within 5%%", total, el, float64(total)/el.Seconds(), rate)
	}
	mean := float64(total) / float64(len(got))
	t.Logf("%d bytes in %v (%.4f of the rate), shares %v", total, el, float64(total)/el.Seconds()/rate, got)
	for i, n := range got {
		if float64(n) < 0.75*mean || float64(n) > 1.25*mean {
			t.Errorf("goroutine %d got %d bytes, mean %.0f: not within 25%%", i, n, mean)
		}
	}
}

// TestRateChange: half a second at 10 MB/s then half a second at 40 MB/s
// pass 25 MB, within 5%.
func TestRateChange(t *testing.T) {
	b := NewAdjustable(10e6)
	var switched time.Time
	got, el := draw(b, 3, time.Second, func() {
		time.Sleep(500 * time.Millisecond)
		b.SetRate(40e6)
		switched = time.Now()
	})
	first := el - time.Since(switched)
	want := 10e6*first.Seconds() + 40e6*(el-first).Seconds()
	t.Logf("%d bytes in %v (switched at %v): %.4f of %.0f", sum(got), el, first, float64(sum(got))/want, want)
	if total := float64(sum(got)); total < 0.95*want || total > 1.05*want {
		t.Errorf("%.0f bytes in %v (switched at %v), want %.0f within 5%%", total, el, first, want)
	}
}

// TestWaitersSeeChange: a Wait that owes minutes returns promptly once the
// limit is lifted or raised; a lifted limit can be put back.
func TestWaitersSeeChange(t *testing.T) {
	for _, newRate := range []int64{0, -1, 1e9} {
		b := NewAdjustable(1000)
		done := make(chan time.Time)
		go func() { b.Wait(1 << 20); done <- time.Now() }()
		time.Sleep(50 * time.Millisecond)
		changed := time.Now()
		b.SetRate(newRate)
		select {
		case at := <-done:
			if d := at.Sub(changed); d > 100*time.Millisecond {
				t.Errorf("SetRate(%d): Wait returned %v after the change", newRate, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("SetRate(%d): Wait still blocked after 5s", newRate)
		}
		if got, want := b.Rate(), max(newRate, 0); got != want {
			t.Errorf("SetRate(%d): Rate() = %d, want %d", newRate, got, want)
		}
	}

	b := NewAdjustable(0)
	start := time.Now()
	b.Wait(100 << 20)
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("an unlimited bucket held 100 MiB for %v", d)
	}
	b.SetRate(1 << 20)
	start = time.Now()
	b.Wait(256 << 10)
	if d := time.Since(start); d < 200*time.Millisecond || d > 400*time.Millisecond {
		t.Errorf("limited again to 1 MiB/s, 256 KiB took %v", d)
	}
}

func TestRateOf(t *testing.T) {
	var nilBucket *Bucket
	for _, c := range []struct {
		b    *Bucket
		want int64
	}{{nilBucket, 0}, {New(0), 0}, {NewAdjustable(-3), 0}, {New(5000), 5000}, {NewAdjustable(7), 7}} {
		if got := c.b.Rate(); got != c.want {
			t.Errorf("Rate() = %d, want %d", got, c.want)
		}
	}
}
