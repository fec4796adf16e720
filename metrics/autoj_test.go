package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAutoJMetrics: -j auto's target and decisions are exported, and the
// spare counters of streams it has not added are not.
func TestAutoJMetrics(t *testing.T) {
	j := NewJob(16)
	j.AutoJ.InUse.Store(4)
	j.AutoJ.Target.Store(8)
	j.AutoJ.Decided("add")
	j.AutoJ.Decided("add")
	j.AutoJ.Decided("stop")
	want := `
# HELP bulkmove_streams_target The number of streams the job aims at: -j, or what -j auto decided last.
# TYPE bulkmove_streams_target gauge
bulkmove_streams_target 8
# HELP bulkmove_streams_decisions_total Decisions of -j auto: add streams, remove streams, stop (no change).
# TYPE bulkmove_streams_decisions_total counter
bulkmove_streams_decisions_total{action="add"} 2
bulkmove_streams_decisions_total{action="remove"} 0
bulkmove_streams_decisions_total{action="stop"} 1
`
	if err := testutil.GatherAndCompare(j.Registry("test"), strings.NewReader(want),
		"bulkmove_streams_target", "bulkmove_streams_decisions_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(j, "bulkmove_stream_sent_bytes_total"); n != 4 {
		t.Errorf("%d streams exported, want the 4 in use", n)
	}
	if n := len(j.StreamsInUse()); n != 4 {
		t.Errorf("StreamsInUse: %d, want 4", n)
	}
}
