package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/internal/units"
)

// Schedule is a weekly timetable of rates, as rclone's --bwlimit takes it.
type Schedule struct {
	slots []slot // sorted by start, one for each start

	// now and after stand for time.Now and time.After; tests replace them.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// slot is a rate in force from start (minutes since Sunday 00:00) until
// the next slot's start, the last one until the first one's a week later.
type slot struct {
	start int
	rate  int64
}

const (
	minutesPerDay  = 24 * 60
	minutesPerWeek = 7 * minutesPerDay
)

// ParseSchedule reads a rate timetable in rclone's --bwlimit syntax:
//
//   - a single rate ("10M", "off"): that rate at all times;
//   - entries separated by spaces (or semicolons), each START,RATE, where
//     START is HH:MM (every day) or DAY-HH:MM (that day of the week only),
//     DAY one of Mon Tue Wed Thu Fri Sat Sun or the full name, in any case:
//     "08:00,512K 12:00,10M 13:00,512K 18:00,30M 23:00,off" or
//     "Mon-00:00,512K Sat-00:00,off".
//
// Rates are read by units.ParseRate; "off" is no limit. An entry's rate holds
// from its start until the next entry's, and the last entry of the week
// holds on until the first: before the day's first HH:MM entry, the day
// before's last one is in force. Where two entries start at the same time
// of the same day, the later in s wins, so "08:00,1M Sun-08:00,off" is
// 1M at 08:00 except on Sundays. Times are wall-clock times in the
// location of the time.Time given to At, Next and the clock Run uses
// (time.Now: the local time zone).
func ParseSchedule(s string) (*Schedule, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == ';' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("rate schedule %q: empty", s)
	}
	if len(fields) == 1 && !strings.Contains(fields[0], ",") {
		rate, err := units.ParseRate(fields[0])
		if err != nil {
			return nil, fmt.Errorf("rate schedule %q: %w", s, err)
		}
		return &Schedule{slots: []slot{{0, rate}}}, nil
	}
	byStart := map[int]int64{}
	for _, f := range fields {
		when, rateText, ok := strings.Cut(f, ",")
		if !ok {
			return nil, fmt.Errorf("rate schedule %q: entry %q is not START,RATE", s, f)
		}
		days, minute, err := parseStart(when)
		if err != nil {
			return nil, fmt.Errorf("rate schedule %q: entry %q: %w", s, f, err)
		}
		rate, err := units.ParseRate(rateText)
		if err != nil {
			return nil, fmt.Errorf("rate schedule %q: entry %q: %w", s, f, err)
		}
		for _, d := range days {
			byStart[d*minutesPerDay+minute] = rate
		}
	}
	sch := &Schedule{}
	for start, rate := range byStart {
		sch.slots = append(sch.slots, slot{start, rate})
	}
	slices.SortFunc(sch.slots, func(a, b slot) int { return a.start - b.start })
	return sch, nil
}

var everyDay = []int{0, 1, 2, 3, 4, 5, 6}

// parseStart reads HH:MM or DAY-HH:MM into the days (0 Sunday) and the
// minute of the day.
func parseStart(s string) (days []int, minute int, err error) {
	days = everyDay
	if day, hhmm, ok := strings.Cut(s, "-"); ok {
		d, ok := weekdays[strings.ToLower(day)]
		if !ok {
			return nil, 0, fmt.Errorf("unknown day %q (want Mon..Sun)", day)
		}
		days, s = []int{d}, hhmm
	}
	hh, mm, _ := strings.Cut(s, ":")
	h, hok := twoDigits(hh)
	m, mok := twoDigits(mm)
	if !hok || !mok || h > 23 || m > 59 {
		return nil, 0, fmt.Errorf("time %q is not HH:MM from 00:00 to 23:59", s)
	}
	return days, h*60 + m, nil
}

// twoDigits reads a number of exactly two decimal digits.
func twoDigits(s string) (int, bool) {
	if len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

var weekdays = map[string]int{
	"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	"sunday": 0, "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6,
}

// At returns the rate in force at t (0: no limit).
func (s *Schedule) At(t time.Time) int64 {
	m := minuteOfWeek(t)
	i, found := slices.BinarySearchFunc(s.slots, m, func(sl slot, m int) int { return sl.start - m })
	if !found {
		i-- // the slot before; -1: the last one of the week before
	}
	if i < 0 {
		i = len(s.slots) - 1
	}
	return s.slots[i].rate
}

// Next returns the first time after t at which the rate changes: the
// start of the next entry whose rate differs from At(t). It returns the
// zero Time if the rate never changes. On a day when the clocks change,
// a start that the day skips or repeats comes when time.Date puts it.
func (s *Schedule) Next(t time.Time) time.Time {
	cur := s.At(t)
	y, mo, d := t.Date()
	wd := int(t.Weekday())
	// The next change is at most a week away: look at the rest of today,
	// the next six days and today's entries a week on.
	for day := range 8 {
		from := ((wd + day) % 7) * minutesPerDay
		i, _ := slices.BinarySearchFunc(s.slots, from, func(sl slot, m int) int { return sl.start - m })
		for ; i < len(s.slots) && s.slots[i].start < from+minutesPerDay; i++ {
			sl := s.slots[i]
			if sl.rate == cur {
				continue
			}
			m := sl.start - from
			if at := time.Date(y, mo, d+day, m/60, m%60, 0, 0, t.Location()); at.After(t) {
				return at
			}
		}
	}
	return time.Time{}
}

func minuteOfWeek(t time.Time) int {
	return int(t.Weekday())*minutesPerDay + t.Hour()*60 + t.Minute()
}

// Run sets b's rate to the schedule's rate now and again at each change,
// calling onChange (if not nil) with each rate it sets, until ctx is done.
// b must not be nil: make it with NewAdjustable. Run looks at the clock
// at least once a minute, so that a wall clock set or a machine woken from
// sleep gets the right rate soon.
func (s *Schedule) Run(ctx context.Context, b *Bucket, onChange func(rate int64)) {
	now, after := s.now, s.after
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = time.After
	}
	first, last := true, int64(0)
	for {
		t := now()
		if rate := s.At(t); first || rate != last {
			b.SetRate(rate)
			if onChange != nil {
				onChange(rate)
			}
			first, last = false, rate
		}
		wait := time.Minute
		if next := s.Next(t); !next.IsZero() {
			wait = min(wait, next.Sub(t))
		}
		select {
		case <-ctx.Done():
			return
		case <-after(wait):
		}
	}
}
