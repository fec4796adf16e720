package main

import (
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
)

// TestProgressLineLimit: the progress line names the bandwidth limit in
// force, and says nothing of one without.
func TestProgressLineLimit(t *testing.T) {
	m := metrics.NewJob(1)
	if line := progressLine(m, 0, 0); strings.Contains(line, "limit") {
		t.Errorf("no limit, yet %q", line)
	}
	m.Limit = ratelimit.NewAdjustable(20 << 20)
	if line := progressLine(m, 0, 0); !strings.Contains(line, " · limit 20 MiB/s") {
		t.Errorf("progress line %q lacks the limit", line)
	}
}
