// Package progressline lays out bulkmove's progress display: given a job's
// numbers and the terminal's width, the line (and a line per stream) that
// fits it. It draws nothing and reads no clock, so that every layout can be
// checked by a table of numbers and widths.
//
// A line is always narrower than the width: a terminal wraps the cursor
// once a line fills its last column, and a wrapped line is one its redraw
// could no longer erase. Fields go by priority: bytes, percent, rate and
// ETA are kept longest (in a compact form when the long one does not fit),
// then the bar, "still walking", files, streams, the bottleneck, the
// bandwidth limit, files/s and compression. Every character written is one
// column wide (ASCII and '·'), so a line's width is its rune count.
package progressline

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bulkmove/bulkmove/internal/units"
)

// Job is what the line shows of a job.
type Job struct {
	DoneBytes, PlannedBytes int64 // PlannedBytes: what the walk has found so far
	Files                   int64 // files done (moved or already in place)
	// Fraction is the share done of the work found so far, 0 to 1 (the
	// bar and percent); it may weigh files as well as bytes.
	Fraction float64
	WalkDone bool
	Rate     float64       // bytes a second, smoothed
	FileRate float64       // files a second, smoothed
	ETA      time.Duration // < 0: unknown
	Streams  int           // streams moving data now
	Limit    int64         // --bwlimit in force, bytes a second; 0: none
	Zstd     int           // compressed size as a percent of the input; < 0: no compression
	// Bottleneck names the resource that limits the move; "": none known.
	Bottleneck string
}

// Stream is what a per-stream line shows.
type Stream struct {
	Bytes, Files     int64
	Read, Send, Wait time.Duration // time reading the source, blocked sending, waiting for work
}

// field is one part of a line, in the order shown; prio orders what is
// kept (lower first, 0: always).
type field struct {
	text string
	prio int
	bar  bool // the bar: text is empty and its width follows the room left
	// tight: apart from the field before by one space, not the separator
	// (the percent after the bar).
	tight bool
}

const (
	minBar = 12 // "[" + 10 + "]"
	maxBar = 32
)

// Line lays out the progress line for a terminal width columns wide. A
// width of 0 or less is no terminal (a log line): every field, no bar.
func Line(j Job, width int) string {
	pct := fmt.Sprintf("%d%%", percent(j.Fraction))
	more := ""
	if !j.WalkDone {
		more = "+"
	}
	// The long form keeps its first four fields or is not used.
	long := []field{
		{bar: true, prio: 4},
		{text: pct, tight: true},
		{text: units.Size(j.DoneBytes) + " / " + units.Size(j.PlannedBytes) + more},
		{text: units.Rate(clampRate(j.Rate))},
		{text: "ETA " + eta(j.ETA) + more},
	}
	if !j.WalkDone {
		long = append(long, field{text: "still walking", prio: 5})
	}
	long = append(long,
		field{text: units.Count(j.Files) + " files", prio: 6},
		field{text: units.Count(clampRate(j.FileRate)) + " files/s", prio: 10},
		field{text: units.Count(int64(j.Streams)) + " streams", prio: 7},
	)
	if j.Limit > 0 {
		long = append(long, field{text: "limit " + units.Rate(j.Limit), prio: 9})
	}
	if j.Zstd >= 0 {
		long = append(long, field{text: fmt.Sprintf("zstd %d%%", j.Zstd), prio: 11})
	}
	if j.Bottleneck != "" {
		long = append(long, field{text: "bottleneck " + j.Bottleneck, prio: 8})
	}
	if width <= 0 {
		return join(long[1:], " · ", 0, 0)
	}
	if s, ok := fit(long, " · ", width-1, j.Fraction); ok {
		return s
	}
	short := []field{
		{bar: true, prio: 4},
		{text: pct, prio: 1, tight: true},
		{text: compact(j.DoneBytes) + "/" + compact(j.PlannedBytes) + more},
		{text: compact(clampRate(j.Rate)) + "/s", prio: 2},
		{text: eta(j.ETA) + more, prio: 3},
	}
	if s, ok := fit(short, " ", width-1, j.Fraction); ok {
		return s
	}
	return Truncate(short[2].text, width-1)
}

// StreamLine lays out the line of stream i for a terminal width columns
// wide (0 or less: no limit).
func StreamLine(i int, s Stream, width int) string {
	fs := []field{
		{text: fmt.Sprintf("  stream %d:", i)},
		{text: units.Size(s.Bytes) + ","},
		{text: units.Count(s.Files) + " files,", prio: 1},
		{text: fmt.Sprintf("read %.1fs,", s.Read.Seconds()), prio: 2},
		{text: fmt.Sprintf("send blocked %.1fs,", s.Send.Seconds()), prio: 3},
		{text: fmt.Sprintf("waiting %.1fs", s.Wait.Seconds()), prio: 4},
	}
	if width <= 0 {
		return strings.TrimSuffix(join(fs, " ", 0, 0), ",")
	}
	s2, ok := fit(fs, " ", width-1, 0)
	if !ok {
		s2 = join(fs[:2], " ", 0, 0)
	}
	return Truncate(strings.TrimSuffix(s2, ","), width-1)
}

// fit keeps the fields that fit in room columns, by priority, and widens
// the bar (if kept) into what is left; ok is false if the fields of
// priority 0 alone do not fit.
func fit(fs []field, sep string, room int, frac float64) (string, bool) {
	n := utf8.RuneCountInString(sep)
	// width is a field's columns with its separator (the tight one's: a
	// space, at worst the separator if the field before is not kept).
	width := func(f field) int {
		if f.bar {
			return minBar + n
		}
		return utf8.RuneCountInString(f.text) + n
	}
	keep := make([]bool, len(fs))
	used := -n
	for i, f := range fs {
		if f.prio == 0 {
			keep[i] = true
			used += width(f)
		}
	}
	if used > room {
		return "", false
	}
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return fs[a].prio - fs[b].prio })
	// Strictly by priority: a field that does not fit ends the line, so
	// that a lesser field never shows where a greater one does not.
	for _, i := range order {
		f := fs[i]
		if f.prio == 0 {
			continue
		}
		if used+width(f) > room {
			break
		}
		keep[i] = true
		used += width(f)
	}
	var kept []field
	for i, f := range fs {
		if keep[i] {
			kept = append(kept, f)
		}
	}
	bar := minBar + min(room-used, maxBar-minBar)
	return join(kept, sep, bar, frac), true
}

// join writes fs apart by sep, the bar barWidth wide.
func join(fs []field, sep string, barWidth int, frac float64) string {
	var b strings.Builder
	for i, f := range fs {
		switch {
		case i > 0 && f.tight && fs[i-1].bar:
			b.WriteString(" ")
		case i > 0:
			b.WriteString(sep)
		}
		if f.bar {
			b.WriteString(drawBar(frac, barWidth))
			continue
		}
		b.WriteString(f.text)
	}
	return b.String()
}

// drawBar draws "[=====>    ]" width columns wide, filled to frac.
func drawBar(frac float64, width int) string {
	inner := width - 2
	n := int(math.Floor(clamp01(frac) * float64(inner)))
	s := strings.Repeat("=", n)
	if n < inner {
		s += ">" + strings.Repeat(" ", inner-n-1)
	}
	return "[" + s + "]"
}

// percent is frac in whole percent, rounded down: 100 only when all is done.
func percent(frac float64) int { return int(math.Floor(clamp01(frac) * 100)) }

func clamp01(f float64) float64 {
	if math.IsNaN(f) || f < 0 {
		return 0
	}
	return min(f, 1)
}

// clampRate is a rate as a whole number a second, 0 for a negative or
// unknown one, and never past what an int64 holds.
func clampRate(r float64) int64 {
	switch {
	case math.IsNaN(r) || r <= 0:
		return 0
	case r >= math.MaxInt64/2:
		return math.MaxInt64 / 2
	}
	return int64(r)
}

// eta writes d for the line: "45s", "12m05s", "3h07m", "4d03h"; "?" if
// unknown.
func eta(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 100*3600:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	case s < 1000*86400:
		return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
	}
	return ">999d"
}

// compact writes a byte count in at most 4 columns and a letter: "512",
// "1.5K", "12M", "980G" (powers of 1024).
func compact(n int64) string {
	if n < 0 {
		n = 0
	}
	v := float64(n)
	unit := ""
	for _, u := range []string{"K", "M", "G", "T", "P", "E"} {
		if v < 1000 {
			break
		}
		v /= 1024
		unit = u
	}
	if unit != "" && v < 9.95 {
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

// Truncate cuts s to at most n runes.
func Truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
