package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []slot // as minutes since Sunday 00:00
	}{
		{"10M", []slot{{0, 10 << 20}}},
		{"off", []slot{{0, 0}}},
		{"  0 ", []slot{{0, 0}}},
		{"08:00,512K", week(8*60, 512<<10)},
		{"Mon-08:00,512K Fri-18:00,off", []slot{{day(1) + 8*60, 512 << 10}, {day(5) + 18*60, 0}}},
		{"fri-18:00,off monday-08:00,512K", []slot{{day(1) + 8*60, 512 << 10}, {day(5) + 18*60, 0}}},
		{"SUN-23:59,1 Sat-00:00,2", []slot{{23*60 + 59, 1 << 10}, {day(6), 2 << 10}}},
		{"12:00,1M;13:00,off", merge(week(12*60, 1<<20), week(13*60, 0))},
		{"08:00,1M Sun-08:00,off", merge([]slot{{8 * 60, 0}}, week(8*60, 1<<20)[1:])},
		{"Sun-08:00,off 08:00,1M", week(8*60, 1<<20)},
		{"00:00,1M 00:00,2M", week(0, 2<<20)},
	} {
		s, err := ParseSchedule(c.in)
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", c.in, err)
			continue
		}
		if fmt.Sprint(s.slots) != fmt.Sprint(c.want) {
			t.Errorf("ParseSchedule(%q) = %v, want %v", c.in, s.slots, c.want)
		}
	}
	for _, in := range []string{
		"", "   ", ";", "bad", "10X", "08:00", "08:00,", ",10M", "08:00,10M,1M", "08:00,bad",
		"8:00,1M", "08:0,1M", "24:00,1M", "23:60,1M", "-1:00,1M", "08-00,1M", "0800,1M", "08:00:00,1M",
		"Mo-08:00,1M", "Mon08:00,1M", "Mon-,1M", "-08:00,1M", "Mon-Tue-08:00,1M", "08:00,1M bad",
		"08:00,1M 10M", "08:00,1M,", "+8:00,1M", "08:+1,1M", "０８:00,1M",
	} {
		if s, err := ParseSchedule(in); err == nil {
			t.Errorf("ParseSchedule(%q) = %v, want an error", in, s.slots)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseSchedule(%q): error %q does not name the input", in, err)
		}
	}
}

func day(d int) int { return d * minutesPerDay }

// week is the same rate from minute m of every day.
func week(m int, rate int64) []slot {
	var s []slot
	for d := range 7 {
		s = append(s, slot{day(d) + m, rate})
	}
	return s
}

// merge interleaves slot lists by start.
func merge(a, b []slot) []slot {
	var s []slot
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || len(a) > 0 && a[0].start < b[0].start {
			s, a = append(s, a[0]), a[1:]
		} else {
			s, b = append(s, b[0]), b[1:]
		}
	}
	return s
}

// jan is a time in the first week of January 2024, which began on a
// Monday: jan(1, ...) is Monday 1st, jan(7, ...) Sunday 7th.
func jan(d, h, m, s int) time.Time { return time.Date(2024, 1, d, h, m, s, 0, time.UTC) }

func TestAtNext(t *testing.T) {
	const (
		k512 = 512 << 10
		m1   = 1 << 20
		m2   = 2 << 20
		m10  = 10 << 20
		m30  = 30 << 20
	)
	never := time.Time{}
	type check struct {
		at   time.Time
		rate int64
		next time.Time
	}
	for _, c := range []struct {
		sched  string
		checks []check
	}{
		// Every day; before 08:00 the day before's 23:00 holds.
		{"08:00,512K 12:00,10M 13:00,512K 18:00,30M 23:00,off", []check{
			{jan(1, 0, 0, 0), 0, jan(1, 8, 0, 0)},
			{jan(1, 7, 59, 59), 0, jan(1, 8, 0, 0)},
			{jan(1, 8, 0, 0), k512, jan(1, 12, 0, 0)},
			{jan(1, 12, 59, 59), m10, jan(1, 13, 0, 0)},
			{jan(1, 22, 0, 0), m30, jan(1, 23, 0, 0)},
			{jan(1, 23, 30, 0), 0, jan(2, 8, 0, 0)},
			{jan(6, 23, 30, 0), 0, jan(7, 8, 0, 0)},
			{jan(7, 23, 59, 59), 0, jan(8, 8, 0, 0)},
		}},
		// Across midnight.
		{"22:00,1M 02:00,off", []check{
			{jan(1, 23, 0, 0), m1, jan(2, 2, 0, 0)},
			{jan(2, 1, 0, 0), m1, jan(2, 2, 0, 0)},
			{jan(2, 3, 0, 0), 0, jan(2, 22, 0, 0)},
		}},
		// Weekdays; before Monday's entry, last week's Friday one holds.
		{"Mon-08:00,512K Fri-18:00,off", []check{
			{jan(1, 7, 0, 0), 0, jan(1, 8, 0, 0)},
			{jan(1, 9, 0, 0), k512, jan(5, 18, 0, 0)},
			{jan(5, 18, 0, 0), 0, jan(8, 8, 0, 0)},
			{jan(6, 12, 0, 0), 0, jan(8, 8, 0, 0)},
			{jan(7, 23, 59, 0), 0, jan(8, 8, 0, 0)},
		}},
		// Saturday night into Sunday, the first day of the table.
		{"Sat-22:00,1M Sun-06:00,2M", []check{
			{jan(6, 23, 0, 0), m1, jan(7, 6, 0, 0)},
			{jan(7, 5, 0, 0), m1, jan(7, 6, 0, 0)},
			{jan(7, 7, 0, 0), m2, jan(13, 22, 0, 0)},
		}},
		// The next change a whole week on.
		{"Mon-08:00,1M Mon-09:00,2M", []check{
			{jan(1, 10, 0, 0), m2, jan(8, 8, 0, 0)},
		}},
		// Entries that change nothing are passed over; a day's exception.
		{"08:00,1M 12:00,1M 18:00,2M", []check{
			{jan(1, 9, 0, 0), m1, jan(1, 18, 0, 0)},
		}},
		{"08:00,1M Sun-08:00,off", []check{
			{jan(7, 9, 0, 0), 0, jan(8, 8, 0, 0)},
			{jan(7, 7, 0, 0), m1, jan(7, 8, 0, 0)},
		}},
		// A rate that never changes.
		{"10M", []check{
			{jan(3, 3, 3, 3), m10, never},
		}},
		{"Wed-10:00,1M", []check{
			{jan(1, 0, 0, 0), m1, never},
		}},
		{"08:00,1M 20:00,1M", []check{
			{jan(1, 0, 0, 0), m1, never},
		}},
	} {
		s, err := ParseSchedule(c.sched)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range c.checks {
			if got := s.At(k.at); got != k.rate {
				t.Errorf("%q.At(%v) = %d, want %d", c.sched, k.at, got, k.rate)
			}
			if got := s.Next(k.at); !got.Equal(k.next) {
				t.Errorf("%q.Next(%v) = %v, want %v", c.sched, k.at, got, k.next)
			}
		}
	}
}

// TestNextChanges: through two weeks, every 7 minutes, Next is after t
// and brings another rate, which held since t.
func TestNextChanges(t *testing.T) {
	for _, sched := range []string{
		"08:00,512K 12:00,10M 13:00,512K 18:00,30M 23:00,off",
		"Mon-08:00,512K Fri-18:00,off 12:00,1M Sun-12:00,1M",
		"Tue-00:00,1 Tue-00:01,2 Tue-23:59,3",
	} {
		s, err := ParseSchedule(sched)
		if err != nil {
			t.Fatal(err)
		}
		for at := jan(1, 0, 0, 0); at.Before(jan(15, 0, 0, 0)); at = at.Add(7 * time.Minute) {
			n := s.Next(at)
			if !n.After(at) || n.After(at.Add(7*24*time.Hour)) || s.At(n) == s.At(at) {
				t.Fatalf("%q: Next(%v) = %v: rate %d there, %d at first", sched, at, n, s.At(n), s.At(at))
			}
			if before := n.Add(-time.Minute); before.After(at) && s.At(before) != s.At(at) {
				t.Fatalf("%q: the rate changed before Next(%v) = %v", sched, at, n)
			}
		}
	}
}

// TestNextClockChange: on days the clocks go forward and back, Next is
// after t and brings another rate.
func TestNextClockChange(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	s, err := ParseSchedule("01:00,1M 02:30,2M 04:00,3M")
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []time.Time{
		time.Date(2024, 3, 30, 20, 0, 0, 0, berlin),  // 02:00 to 03:00 is skipped on the 31st
		time.Date(2024, 10, 26, 20, 0, 0, 0, berlin), // 02:00 to 03:00 comes twice on the 27th
	} {
		for at := start; at.Before(start.Add(12 * time.Hour)); at = at.Add(5 * time.Minute) {
			if n := s.Next(at); !n.After(at) || s.At(n) == s.At(at) {
				t.Errorf("Next(%v) = %v: rate %d there, %d at first", at, n, s.At(n), s.At(at))
			}
		}
	}
}

// fakeClock stands in for time.Now and time.After: a wait of d moves the
// clock on by d, or to the next of jumps if there is one, and is over
// at once, unless ctx is done.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	jumps []time.Time
	waits []time.Duration
	ctx   context.Context
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return nil
	}
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	if len(c.jumps) > 0 {
		c.t, c.jumps = c.jumps[0], c.jumps[1:]
	}
	ch := make(chan time.Time, 1)
	ch <- c.t
	return ch
}

func TestRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		sched string
		start time.Time
		jumps []time.Time
		want  []string // time and rate at each onChange, until ctx is cancelled
	}{
		{"daily", "08:00,1M 18:00,off", jan(1, 7, 0, 0), nil, []string{
			"Mon 07:00 0", "Mon 08:00 1048576", "Mon 18:00 0", "Tue 08:00 1048576", "Tue 18:00 0",
		}},
		{"weekly", "Mon-08:00,1M Fri-18:00,512K", jan(7, 23, 0, 0), nil, []string{
			"Sun 23:00 524288", "Mon 08:00 1048576", "Fri 18:00 524288", "Mon 08:00 1048576",
		}},
		{"clock set", "08:00,1M 18:00,off", jan(1, 7, 0, 0), []time.Time{jan(1, 7, 1, 0), jan(1, 12, 34, 56), jan(3, 19, 0, 0)}, []string{
			"Mon 07:00 0", "Mon 12:34 1048576", "Wed 19:00 0", "Thu 08:00 1048576",
		}},
		{"constant", "10M", jan(1, 7, 0, 0), nil, []string{"Mon 07:00 10485760"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ParseSchedule(c.sched)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clock := &fakeClock{t: c.start, jumps: c.jumps, ctx: ctx}
			s.now, s.after = clock.now, clock.after
			b := NewAdjustable(123)
			var got []string
			onChange := func(rate int64) {
				if b.Rate() != rate {
					t.Errorf("onChange(%d) with the bucket at %d", rate, b.Rate())
				}
				got = append(got, clock.now().Format("Mon 15:04 ")+fmt.Sprint(rate))
				if len(got) == len(c.want) {
					cancel()
				}
			}
			s.Run(ctx, b, onChange)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("changes:\n got %q\nwant %q", got, c.want)
			}
			for _, w := range clock.waits {
				if w <= 0 || w > time.Minute {
					t.Fatalf("Run waited %v", w)
				}
			}
		})
	}
}

// TestRunRealClock: with the real clock, Run sets the rate at once and
// returns when ctx is cancelled.
func TestRunRealClock(t *testing.T) {
	s, err := ParseSchedule("Mon-00:00,1M Mon-00:00,2M")
	if err != nil {
		t.Fatal(err)
	}
	b := NewAdjustable(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rates := make(chan int64, 10)
	go func() { s.Run(ctx, b, func(r int64) { rates <- r }); close(done) }()
	if r := <-rates; r != 2<<20 || b.Rate() != 2<<20 {
		t.Errorf("onChange(%d), bucket at %d; want %d", r, b.Rate(), 2<<20)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run still running a second after cancel")
	}
}
