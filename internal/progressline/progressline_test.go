package progressline

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fitsIn fails the test unless line is narrower than width and made of
// one-column characters only.
func fitsIn(t *testing.T, line string, width int) {
	t.Helper()
	if n := utf8.RuneCountInString(line); width > 0 && n >= width {
		t.Errorf("%d columns at width %d: %q", n, width, line)
	}
	for _, r := range line {
		if (r < ' ' || r > '~') && r != '·' {
			t.Errorf("%q is not one column wide, in %q", r, line)
		}
	}
}

var (
	typical = Job{
		DoneBytes: 1288490188, PlannedBytes: 2684354560, Files: 12345, Fraction: 0.48,
		WalkDone: true, Rate: 23.4 * (1 << 20), FileRate: 1234, ETA: 62 * time.Second,
		Streams: 8, Limit: 20 << 20, Zstd: 45, Bottleneck: "dest-latency",
	}
	walking = func() Job { j := typical; j.WalkDone = false; return j }()
	stalled = Job{PlannedBytes: 5 << 30, Fraction: 0, WalkDone: true, ETA: -1, Zstd: -1}
	huge    = Job{
		DoneBytes: math.MaxInt64 - 1, PlannedBytes: math.MaxInt64, Files: math.MaxInt64,
		Fraction: 0.999, Rate: math.MaxFloat64, FileRate: math.Inf(1), ETA: math.MaxInt64,
		Streams: 1 << 20, Limit: math.MaxInt64, Zstd: 100, Bottleneck: "receiver-cpu", WalkDone: true,
	}
	done = Job{DoneBytes: 1 << 30, PlannedBytes: 1 << 30, Files: 3, Fraction: 1, WalkDone: true, Rate: 1 << 20, ETA: 0, Zstd: -1}
)

// TestLine: at every width each case's line fits, keeps the bytes, percent,
// rate and ETA, marks a walk still going on, and shows the lesser fields
// only where there is room.
func TestLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		job   Job
		width int
		want  []string // substrings
		not   []string
	}{
		{"typical 200", typical, 200, []string{"[", "=>", "48%", "1.2 GiB / 2.5 GiB", "23 MiB/s", "ETA 1m02s", "12,345 files", "1,234 files/s", "8 streams", "limit 20 MiB/s", "zstd 45%", "bottleneck dest-latency"}, []string{"+", "walking"}},
		{"typical 80", typical, 80, []string{"] 48%", "1.2 GiB / 2.5 GiB", "23 MiB/s", "ETA 1m02s", "12,345 files"}, []string{"streams", "files/s", "zstd", "bottleneck"}},
		{"typical 60", typical, 60, []string{"48%", "1.2 GiB / 2.5 GiB", "23 MiB/s", "ETA 1m02s"}, []string{"[", "files", "streams", "zstd"}},
		{"typical 40", typical, 40, []string{"48%", "1.2G/2.5G", "23M/s", "1m02s"}, []string{"files", "streams", "bottleneck"}},
		{"walking 200", walking, 200, []string{"2.5 GiB+", "ETA 1m02s+", "still walking", "bottleneck"}, nil},
		{"walking 80", walking, 80, []string{"2.5 GiB+", "ETA 1m02s+", "still walking"}, []string{"files/s"}},
		{"walking 40", walking, 40, []string{"48%", "2.5G+", "23M/s", "1m02s+"}, nil},
		{"zero rate 200", stalled, 200, []string{"[>", "0%", "0 B / 5.0 GiB", "0 B/s", "ETA ?"}, []string{"zstd", "limit", "bottleneck", "+"}},
		{"zero rate 80", stalled, 80, []string{"0%", "0 B / 5.0 GiB", "0 B/s", "ETA ?"}, nil},
		{"zero rate 40", stalled, 40, []string{"0%", "0 B / 5.0 GiB", "0 B/s", "ETA ?"}, nil},
		{"zero rate 30", stalled, 30, []string{"0%", "0/5.0G", "0/s", "?"}, nil},
		{"huge 200", huge, 200, []string{"99%", "8.0 EiB / 8.0 EiB", "EiB/s", "ETA >999d", "9,223,372,036,854,775,807 files", "1,048,576 streams"}, nil},
		{"huge 80", huge, 80, []string{"99%", "8.0 EiB / 8.0 EiB", "EiB/s", "ETA >999d"}, nil},
		{"huge 40", huge, 40, []string{"99%", "8.0E/8.0E", "/s", ">999d"}, nil},
		{"done 80", done, 80, []string{"=] 100%", "1.0 GiB / 1.0 GiB", "ETA 0s"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			line := Line(c.job, c.width)
			fitsIn(t, line, c.width)
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q lacks %q", line, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(line, w) {
					t.Errorf("%q has %q", line, w)
				}
			}
		})
	}
}

// TestLineEveryWidth: from a width of 1 to 250 columns, every line is
// narrower than the terminal, and a wider terminal never shows less.
func TestLineEveryWidth(t *testing.T) {
	for _, j := range []Job{typical, walking, stalled, huge, done} {
		prev := 0
		for w := 1; w <= 250; w++ {
			line := Line(j, w)
			fitsIn(t, line, w)
			if n := utf8.RuneCountInString(line); n < prev {
				t.Errorf("width %d: %d columns, fewer than at %d: %q", w, n, w-1, line)
			}
			prev = utf8.RuneCountInString(line)
		}
	}
}

// TestLineBar: the bar fills with the fraction done, and is drawn neither
// past full nor below empty.
func TestLineBar(t *testing.T) {
	bar := regexp.MustCompile(`\[(=*)>? *\]`)
	for _, frac := range []float64{-1, 0, 0.25, 0.5, 0.999, 1, 7, math.NaN()} {
		j := typical
		j.Fraction = frac
		m := bar.FindStringSubmatch(Line(j, 120))
		if m == nil {
			t.Fatalf("fraction %v: no bar in %q", frac, Line(j, 120))
		}
		inner := len(m[0]) - 2
		want := int(math.Floor(clamp01(frac) * float64(inner)))
		if got := len(m[1]); got != want {
			t.Errorf("fraction %v: %d of %d filled, want %d: %q", frac, got, inner, want, m[0])
		}
	}
}

// TestLog: with no terminal (width 0) the line has every field and no bar.
func TestLog(t *testing.T) {
	line := Line(walking, 0)
	fitsIn(t, line, 0)
	if strings.Contains(line, "[") {
		t.Errorf("a bar in a log line: %q", line)
	}
	for _, w := range []string{"48%", "still walking", "files/s", "zstd 45%", "bottleneck dest-latency"} {
		if !strings.Contains(line, w) {
			t.Errorf("log line %q lacks %q", line, w)
		}
	}
}

// TestStreamLine: a stream's line fits every width and keeps its number
// and bytes longest.
func TestStreamLine(t *testing.T) {
	s := Stream{Bytes: 3 << 30, Files: 1234567, Read: 12300 * time.Millisecond, Send: 4 * time.Second, Wait: time.Hour}
	full := StreamLine(11, s, 200)
	if want := "  stream 11: 3.0 GiB, 1,234,567 files, read 12.3s, send blocked 4.0s, waiting 3600.0s"; full != want {
		t.Errorf("at 200:\n got %q\nwant %q", full, want)
	}
	for w := 1; w <= 200; w++ {
		line := StreamLine(11, s, w)
		fitsIn(t, line, w)
		if w >= 40 && !strings.HasPrefix(line, "  stream 11: 3.0 GiB") {
			t.Errorf("at %d: %q", w, line)
		}
		if strings.HasSuffix(line, ",") {
			t.Errorf("at %d a trailing comma: %q", w, line)
		}
	}
	if got := StreamLine(0, Stream{}, 0); got != "  stream 0: 0 B, 0 files, read 0.0s, send blocked 0.0s, waiting 0.0s" {
		t.Errorf("log form: %q", got)
	}
}

func TestETA(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-1: "?", 0: "0s", 1499 * time.Millisecond: "1s", 59 * time.Second: "59s", time.Minute: "1m00s",
		3599 * time.Second: "59m59s", time.Hour: "1h00m", 99*time.Hour + 59*time.Minute: "99h59m",
		100 * time.Hour: "4d04h", 999 * 24 * time.Hour: "999d00h", 1000 * 24 * time.Hour: ">999d",
	} {
		if got := eta(d); got != want {
			t.Errorf("eta(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCompact(t *testing.T) {
	for n, want := range map[int64]string{
		-5: "0", 0: "0", 999: "999", 1000: "1.0K", 1536: "1.5K", 10 << 20: "10M", 999 << 20: "999M",
		1023 << 20: "1.0G", math.MaxInt64: "8.0E",
	} {
		if got := compact(n); got != want {
			t.Errorf("compact(%d) = %q, want %q", n, got, want)
		}
	}
	_ = fmt.Sprint()
}
