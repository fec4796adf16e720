package units

import (
	"math"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		bare Bare
		want int64
	}{
		{"0", BareBytes, 0}, {"4096", BareBytes, 4096}, {"4096", BareKiB, 4096 << 10},
		{"64m", BareBytes, 64 << 20}, {"64M", BareBytes, 64 << 20}, {"64MiB", BareBytes, 64 << 20}, {"64mib", BareBytes, 64 << 20},
		{"64MB", BareBytes, 64e6}, {"64mb", BareBytes, 64e6}, {"64Mb", BareBytes, 64e6},
		{"1.5G", BareBytes, 3 << 29}, {"1.5GB", BareBytes, 1.5e9}, {".5K", BareBytes, 512}, {"5.k", BareBytes, 5 << 10},
		{"1T", BareBytes, 1 << 40}, {"1TB", BareBytes, 1e12}, {"1P", BareBytes, 1 << 50}, {"1PB", BareBytes, 1e15},
		{"100B", BareBytes, 100}, {"100b", BareKiB, 100}, {"1.1K", BareBytes, 1126}, {"0.6B", BareBytes, 1},
		{"2G-1", BareBytes, 2<<30 - 1}, {"1K+1", BareBytes, 1025}, {"100-1", BareBytes, 99}, {"1-1", BareKiB, 1023},
		{"9223372036854775807", BareBytes, math.MaxInt64}, {"8191P", BareBytes, 8191 << 50},
		{"9007199254740993B", BareBytes, 9007199254740993}, // not representable in a float64
	} {
		got, err := ParseSize(c.in, c.bare)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q, %d) = %d, %v; want %d", c.in, c.bare, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"", "empty"}, {" ", "no number"}, {"M", "no number"}, {"KiB", "no number"}, {".", "not a decimal"},
		{"..5M", "not a decimal"}, {"1.2.3M", "not a decimal"}, {"-1", "sign"}, {"-1M", "sign"}, {"+1M", "sign"},
		{"1e6", "unit"}, {"inf", "no number"}, {"NaN", "no number"}, {"0x10", "unit"}, {"10X", "unit"},
		{"10Mbit", "unit"}, {"10 M", "unit"}, {" 10M", "no number"}, {"10M ", "unit"}, {"10M/s", "unit"},
		{"1iB", "unit"}, {"1BK", "unit"}, {"1bb", "unit"}, {"1,5M", "unit"}, {"1_000K", "unit"},
		{"0.4B", "less than one byte"}, {"9223372036854775808", "too large"}, {"8192P", "too large"},
		{"99999999999999999999", "too large"}, {"0-1", "negative"}, {"1M-2", "unit"},
	} {
		got, err := ParseSize(c.in, BareBytes)
		switch {
		case err == nil:
			t.Errorf("ParseSize(%q) = %d, want an error", c.in, got)
		case !strings.Contains(err.Error(), `size "`+c.in+`"`) || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "e.g. 64M"):
			t.Errorf("ParseSize(%q): error %q does not name the input, say %q and give examples", c.in, err, c.why)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"off", 0}, {"OFF", 0}, {"0", 0}, {"0M", 0}, {"0.0K", 0},
		{"1", 1 << 10}, {"512", 512 << 10}, {"2.5", 2560},
		{"500K", 500 << 10}, {"500k", 500 << 10}, {"50M", 50 << 20}, {"1G", 1 << 30}, {"2T", 2 << 40}, {"1P", 1 << 50},
		{"1.5M", 3 << 19}, {".5M", 1 << 19}, {"5.M", 5 << 20},
		{"1KiB", 1 << 10}, {"10MiB", 10 << 20}, {"1gib", 1 << 30}, {"1TiB", 1 << 40},
		{"1KB", 1000}, {"10MB", 10e6}, {"1.5GB", 1.5e9}, {"1mb", 1e6}, {"2TB", 2e12},
		{"1B", 1}, {"100b", 100}, {"0.6B", 1}, {"8191P", 8191 << 50},
	} {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"", " ", "M", "K", "KiB", ".", "..5M", "1.2.3M", "-1M", "+1M", "1e6", "1E6", "inf", "NaN", "0x10",
		"10X", "10Mbit", "10 M", " 10M", "10M ", "10M/s", "1iB", "1BK", "1,5M", "1_000K", "on", "offf",
		"0.4B", "0.0000001K", "8192P", "99999999999999999999",
	} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", in, got)
		} else if !strings.Contains(err.Error(), `rate "`+in+`"`) || !strings.Contains(err.Error(), "or off") {
			t.Errorf("ParseRate(%q): error %q does not name the input and give examples", in, err)
		}
	}
}
