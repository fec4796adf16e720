package source

import "testing"

// A file read ahead holds a buffer near its own size: a window of small
// files must not hold aheadMax each.
func TestAheadBufferSizes(t *testing.T) {
	for _, tc := range []struct {
		size    int64
		wantCap int
	}{
		{0, 0},
		{1, 4 << 10},
		{4 << 10, 4 << 10},
		{4<<10 + 1, 8 << 10},
		{100 << 10, 128 << 10},
		{aheadMax, max(128<<10, aheadMax)},
	} {
		bp := aheadGet(tc.size)
		if cap(*bp) != tc.wantCap {
			t.Errorf("a buffer for %d bytes holds %d, want %d", tc.size, cap(*bp), tc.wantCap)
		}
		if int64(cap(*bp)) < tc.size {
			t.Fatalf("a buffer for %d bytes holds only %d", tc.size, cap(*bp))
		}
		aheadPut(bp)
		// What comes back is big enough for every size of its class.
		if again := aheadGet(tc.size); int64(cap(*again)) < tc.size {
			t.Errorf("a reused buffer for %d bytes holds only %d", tc.size, cap(*again))
		}
	}
}
