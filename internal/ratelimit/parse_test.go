package ratelimit

import (
	"strings"
	"testing"
)

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
		} else if !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParseRate(%q): error %q does not name the input", in, err)
		}
	}
}
