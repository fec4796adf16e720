package autojobs

import (
	"testing"
	"time"
)

// TestAtWindow: over a far path, streams near an SSH channel's limit (2 MiB
// a round trip) are window-bound; streams far below it, or any stream over
// a near path, are not.
func TestAtWindow(t *testing.T) {
	for _, c := range []struct {
		perStream float64
		rtt       time.Duration
		want      bool
	}{
		{15 << 20, 100 * time.Millisecond, true}, // 15 MiB/s of at most 20
		{4 << 20, 100 * time.Millisecond, false}, // the link (or slow start) holds them
		{40 << 20, 50 * time.Millisecond, true},
		{15 << 20, time.Millisecond, false}, // a near path: 2 GiB/s a stream would be its window
		{15 << 20, 0, false},
	} {
		if got := AtWindow(c.perStream, c.rtt); got != c.want {
			t.Errorf("AtWindow(%.0f MiB/s, %s) = %v, want %v", c.perStream/(1<<20), c.rtt, got, c.want)
		}
	}
}
