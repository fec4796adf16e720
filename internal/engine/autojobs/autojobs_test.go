package autojobs

import (
	"runtime"
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

// TestSSHStartAndFarStep: -j auto dials no more SSH connections than the
// CPUs here (at least 2, at most Start), and the far path's first step
// still brings a job to twice Start whatever it started with, within
// --max-streams.
func TestSSHStartAndFarStep(t *testing.T) {
	if got, want := SSHStart(), min(Start, max(2, runtime.NumCPU())); got != want {
		t.Errorf("SSHStart() = %d, want %d", got, want)
	}
	for _, tc := range []struct{ jobs, max, want int }{
		{2, 16, 6}, {3, 16, 5}, {4, 16, 4}, {8, 16, 8}, {2, 4, 2}, {4, 6, 2}, {4, 4, 0},
	} {
		if got := FarStep(tc.jobs, tc.max); got != tc.want {
			t.Errorf("FarStep(%d, %d) = %d, want %d", tc.jobs, tc.max, got, tc.want)
		}
	}
}
