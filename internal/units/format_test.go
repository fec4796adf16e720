package units

import (
	"math"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Size(0), "0 B"}, {Size(8), "8 B"}, {Size(12), "12 B"}, {Size(1023), "1023 B"},
		{Size(3 << 20), "3.0 MiB"}, {Size(12<<20 + 300<<10), "12 MiB"}, {Size(3 << 29), "1.5 GiB"},
		{Size(-2048), "-2.0 KiB"}, {Size(math.MaxInt64), "8.0 EiB"},
		{Rate(12 << 20), "12 MiB/s"}, {Rate(0), "0 B/s"},
		{Count(0), "0"}, {Count(999), "999"}, {Count(20000), "20,000"}, {Count(-1234567), "-1,234,567"},
		{Exact(0), "0B"}, {Exact(1000), "1000B"}, {Exact(50 << 20), "50MiB"}, {Exact(12800 << 10), "12800KiB"},
		{Exact(1 << 50), "1PiB"}, {Exact(3 << 40), "3TiB"}, {Exact(1<<30 + 1), "1073741825B"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// FuzzParse: ParseSize and ParseRate never panic; what they accept is not
// negative; Exact reads back exactly, and Size within its rounding.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"64m", "1.5G", "10MB", "2GiB", "4096", "2G-1", "off", "", "-1", "1e6", "8191P", ".5k", "0.4B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, bare := range []Bare{BareBytes, BareKiB} {
			n, err := ParseSize(s, bare)
			if err != nil {
				if !strings.Contains(err.Error(), "size ") {
					t.Fatalf("ParseSize(%q): error %q does not name the input", s, err)
				}
				continue
			}
			if n < 0 {
				t.Fatalf("ParseSize(%q) = %d, negative", s, n)
			}
			roundTrip(t, n)
		}
		if n, err := ParseRate(s); err == nil && n < 0 {
			t.Fatalf("ParseRate(%q) = %d, negative", s, n)
		}
	})
}

// roundTrip checks that Exact(n) reads back as n, and Size(n), written
// without its space, as n within Size's rounding to two significant digits
// (below 1 EiB: rsync's units stop at P, and so does ParseSize).
func roundTrip(t *testing.T, n int64) {
	t.Helper()
	if n >= 1<<60 {
		return
	}
	for _, bare := range []Bare{BareBytes, BareKiB} {
		if got, err := ParseSize(Exact(n), bare); err != nil || got != n {
			t.Fatalf("ParseSize(Exact(%d) = %q) = %d, %v", n, Exact(n), got, err)
		}
	}
	text := strings.ReplaceAll(Size(n), " ", "")
	got, err := ParseSize(text, BareBytes)
	if err != nil {
		t.Fatalf("ParseSize(Size(%d) = %q): %v", n, text, err)
	}
	if d := math.Abs(float64(got) - float64(n)); d > 0.05*float64(n)+0.5 {
		t.Fatalf("ParseSize(Size(%d) = %q) = %d: off by %.0f", n, text, got, d)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, 1023, 1024, 1025, 10239, 10240, 99999, 1 << 20, 1<<30 - 1, 3 << 29, 1 << 50, 8191 << 50, math.MaxInt64 >> 1} {
		roundTrip(t, n)
	}
}

// TestBigNum: numbers as rsync 3.2 writes them in --stats and in
// --out-format's %'l, at each level of -h.
func TestBigNum(t *testing.T) {
	for _, c := range []struct {
		n     int64
		human int
		want  string
	}{
		{588905, 0, "588905"}, {588905, 1, "588,905"}, {588907, 2, "588.91K"}, {4096, 3, "4.00K"},
		{87, 2, "87"}, {999, 2, "999"}, {1000, 2, "1.00K"}, {1023, 3, "1,023"},
		{1178828, 2, "1.18M"}, {5 << 30, 3, "5.00G"}, {1234567, 1, "1,234,567"},
	} {
		if got := BigNum(c.n, c.human); got != c.want {
			t.Errorf("BigNum(%d, %d) = %q, want %q", c.n, c.human, got, c.want)
		}
	}
	for _, c := range []struct {
		x     float64
		human int
		want  string
	}{
		{1178828, 1, "1,178,828.00"}, {1178828, 2, "1.18M"}, {494, 2, "494.00"}, {2384.2449, 1, "2,384.24"}, {1, 1, "1.00"},
	} {
		if got := BigDNum(c.x, c.human, 2); got != c.want {
			t.Errorf("BigDNum(%v, %d, 2) = %q, want %q", c.x, c.human, got, c.want)
		}
	}
}
