package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
)

// TestProgressLimitAndWalk: the line names the bandwidth limit in force
// (and none without one), and marks the total as growing while the walk
// goes on.
func TestProgressLimitAndWalk(t *testing.T) {
	m := metrics.NewJob(1)
	m.PlannedBytes.Store(1 << 30)
	s := newSmoother()
	if line := progressline.Line(s.job(m, time.Now()), 200); strings.Contains(line, "limit") || !strings.Contains(line, "1.0 GiB+") || !strings.Contains(line, "still walking") {
		t.Errorf("no limit, walk going on: %q", line)
	}
	m.Limit = ratelimit.NewAdjustable(20 << 20)
	m.WalkDone.Store(true)
	if line := progressline.Line(s.job(m, time.Now()), 200); !strings.Contains(line, " · limit 20 MiB/s") || strings.Contains(line, "+") || strings.Contains(line, "walking") {
		t.Errorf("limit of 20 MiB/s, walk done: %q", line)
	}
}

// TestProgressSmoothed: data that arrives in bursts (as under --bwlimit)
// reads as its mean rate, not as bursts and zeros, and the ETA follows
// from it; the bar's fraction is of what the walk found.
func TestProgressSmoothed(t *testing.T) {
	m := metrics.NewJob(1)
	m.PlannedBytes.Store(1 << 30)
	m.WalkDone.Store(true)
	s := newSmoother()
	t0 := time.Now()
	for tick := 1; tick <= 100; tick++ { // 10 s of 100 ms ticks
		if tick%5 == 0 {
			m.DoneBytes.Add(5 << 20) // 10 MiB/s in two bursts a second
		}
		j := s.job(m, t0.Add(time.Duration(tick)*redrawEvery))
		if tick < 60 {
			continue
		}
		if j.Rate < 9<<20 || j.Rate > 11<<20 {
			t.Fatalf("tick %d: %.2f MiB/s, want about 10", tick, j.Rate/(1<<20))
		}
		left := float64(1<<30-m.DoneBytes.Load()) / (10 << 20)
		if got := j.ETA.Seconds(); got < left*0.9 || got > left*1.1 {
			t.Errorf("tick %d: ETA %.1fs, want about %.1fs", tick, got, left)
		}
		if want := float64(m.DoneBytes.Load()) / (1 << 30); j.Fraction < want*0.99 || j.Fraction > want*1.01 {
			t.Errorf("fraction %.3f, want %.3f", j.Fraction, want)
		}
	}
}

// TestProgressNothingToMove: an empty tree, walked, is all done.
func TestProgressNothingToMove(t *testing.T) {
	m := metrics.NewJob(1)
	m.WalkDone.Store(true)
	j := newSmoother().job(m, time.Now())
	if j.Fraction != 1 || j.ETA != 0 {
		t.Errorf("empty tree: fraction %v, ETA %v", j.Fraction, j.ETA)
	}
	if line := progressline.Line(j, 80); !strings.Contains(line, "100%") {
		t.Errorf("%q", line)
	}
}

// TestTTYWriterClears: each redraw erases the whole block it drew, also
// the rows a narrowed terminal rewrapped it into, and a message clears it
// first.
func TestTTYWriterClears(t *testing.T) {
	var out bytes.Buffer
	cols := 80
	tw := &ttyWriter{w: &out, size: func() (int, int) { return cols, 24 }}
	long := strings.Repeat("x", 79)
	tw.draw([]string{long, "  stream 0"})
	if got := out.String(); got != long+"\n  stream 0" {
		t.Fatalf("first draw: %q", got)
	}
	out.Reset()
	tw.draw([]string{"one"})
	if got := out.String(); got != "\r\x1b[K\x1b[1A\x1b[Kone" {
		t.Errorf("redraw of a 2-line block: %q", got)
	}
	out.Reset()
	tw.draw([]string{long, "two"})
	cols = 40 // the 79 columns now take 2 rows
	out.Reset()
	tw.Write([]byte("bulkmove: a message\n"))
	if got := out.String(); got != "\r\x1b[K\x1b[1A\x1b[K\x1b[1A\x1b[Kbulkmove: a message\n" {
		t.Errorf("message after a narrowing: %q", got)
	}
	out.Reset()
	tw.draw([]string{"three"})
	tw.stop()
	if got := out.String(); got != "three\r\x1b[K" {
		t.Errorf("draw after the message, then stop: %q", got)
	}
}

// TestTTYWriterCROnly: with NO_COLOR or TERM=dumb the display writes no
// escape sequence: a carriage return and spaces blank the line, and the
// per-stream lines (which would need the cursor moved up) are left out.
func TestTTYWriterCROnly(t *testing.T) {
	for _, env := range []map[string]string{{"NO_COLOR": "1"}, {"TERM": "dumb"}, {"NO_COLOR": "1", "TERM": "xterm"}} {
		if !plainTerminal(func(k string) string { return env[k] }) {
			t.Errorf("%v: not plain", env)
		}
	}
	for _, env := range []map[string]string{{}, {"NO_COLOR": ""}, {"TERM": "xterm-256color"}} {
		if plainTerminal(func(k string) string { return env[k] }) {
			t.Errorf("%v: plain", env)
		}
	}
	var out bytes.Buffer
	tw := &ttyWriter{w: &out, crOnly: true, size: func() (int, int) { return 80, 24 }}
	tw.draw([]string{"12345", "  stream 0"})
	tw.draw([]string{"abc", "  stream 0"})
	tw.Write([]byte("msg\n"))
	tw.draw([]string{"de"})
	tw.stop()
	if got, want := out.String(), "12345\r     \rabc\r   \rmsg\nde\r  \r"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestStreamLinesCapped: a block of stream lines never outgrows the
// screen: the streams past it are counted on the last line.
func TestStreamLinesCapped(t *testing.T) {
	m := metrics.NewJob(30)
	for _, c := range m.Streams {
		c.BytesSent.Store(1)
	}
	lines := streamLines(m, 80, 10)
	if len(lines) != 10 || lines[9] != "  (21 more streams)" || !strings.HasPrefix(lines[8], "  stream 8: ") {
		t.Errorf("%d lines: %q", len(lines), lines)
	}
	if lines := streamLines(m, 80, 40); len(lines) != 30 {
		t.Errorf("room for all: %d lines", len(lines))
	}
}
