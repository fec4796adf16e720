package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLint: every metric follows Prometheus naming conventions.
func TestLint(t *testing.T) {
	j := NewJob(3)
	j.Streams[1].BytesSent.Add(100)
	reg := j.Registry("test")
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	var r Receiver
	problems, err = testutil.GatherAndLint(r.Registry("test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("receiver: %s: %s", p.Metric, p.Text)
	}
}

// TestCollect: the exported values are the counters' values, per stream.
func TestCollect(t *testing.T) {
	j := NewJob(2)
	j.Streams[1].BytesSent.Add(4096)
	j.Streams[0].SendNanos.Add(1500 * int64(time.Millisecond))
	j.PlannedFiles.Store(10)
	j.WalkDone.Store(true)
	want := `
# HELP bulkmove_stream_sent_bytes_total File data sent by each stream.
# TYPE bulkmove_stream_sent_bytes_total counter
bulkmove_stream_sent_bytes_total{stream="0"} 0
bulkmove_stream_sent_bytes_total{stream="1"} 4096
# HELP bulkmove_stream_send_blocked_seconds_total Time each stream was blocked writing to its connection (socket full).
# TYPE bulkmove_stream_send_blocked_seconds_total counter
bulkmove_stream_send_blocked_seconds_total{stream="0"} 1.5
bulkmove_stream_send_blocked_seconds_total{stream="1"} 0
# HELP bulkmove_job_planned_files Files found by the walk so far (grows until the walk is done).
# TYPE bulkmove_job_planned_files gauge
bulkmove_job_planned_files 10
# HELP bulkmove_job_walk_done 1 once the walk of the source is complete.
# TYPE bulkmove_job_walk_done gauge
bulkmove_job_walk_done 1
`
	if err := testutil.GatherAndCompare(j.Registry("test"), strings.NewReader(want),
		"bulkmove_stream_sent_bytes_total", "bulkmove_stream_send_blocked_seconds_total", "bulkmove_job_planned_files", "bulkmove_job_walk_done"); err != nil {
		t.Error(err)
	}
}

// TestDecide: each controlled scenario names its resource.
func TestDecide(t *testing.T) {
	s := time.Second.Nanoseconds()
	t0 := time.Unix(0, 0)
	base := sample{at: t0, active: 4}
	later := func(f func(*sample)) sample {
		x := sample{at: t0.Add(time.Second), active: 4}
		f(&x)
		return x
	}
	cases := []struct {
		name  string
		b     sample
		local bool
		want  string
		more  bool
	}{
		{"slow source, streams with slack", later(func(x *sample) { x.read = 4 * s * 7 / 10; x.cpu = s / 10 }), false, SourceRead, true},
		{"source disk saturated", later(func(x *sample) { x.read = 4 * s * 95 / 100; x.cpu = s / 10 }), false, SourceRead, false},
		{"slow link", later(func(x *sample) { x.send = 4 * s * 95 / 100; x.cpu = s / 10 }), false, Network, false},
		{"slow link, room per stream", later(func(x *sample) { x.send = 4 * s * 7 / 10; x.cpu = s / 10 }), false, Network, true},
		{"slow receiver disk", later(func(x *sample) { x.recvWrite = 4 * s * 95 / 100; x.send = 4 * s * 9 / 10; x.cpu = s / 10 }), false, ReceiverWrite, false},
		{"sender CPU", later(func(x *sample) { x.cpu = 2 * s * 95 / 100; x.send = 2 * s }), false, SenderCPU, false},
		{"receiver CPU", later(func(x *sample) { x.recvCPU = 2 * s * 9 / 10; x.cpu = s / 2 }), false, ReceiverCPU, false},
		{"long path", later(func(x *sample) { x.wait = 4 * s * 8 / 10; x.cpu = s / 10 }), false, Latency, true},
		{"local copy, disk busy", later(func(x *sample) { x.recvWrite = 4 * s * 6 / 10; x.cpu = s / 2 }), true, ReceiverWrite, true},
		{"nothing running", later(func(x *sample) { x.active = 0 }), false, Idle, false},
		// Files wait on NFS, one operation at a time: the latency is named,
		// and more operations at once are the cure, not more streams.
		{"source on NFS", later(func(x *sample) { x.read = 4 * s * 8 / 10; x.cpu = s / 10; x.srcLat = time.Millisecond }), false, SourceLatency, false},
		{"source busy, not slow per file", later(func(x *sample) { x.read = 4 * s * 8 / 10; x.cpu = s / 10; x.srcLat = 3 * time.Microsecond }), false, SourceRead, true},
		{"destination on NFS", later(func(x *sample) { x.recvWrite = 4 * s * 9 / 10; x.cpu = s / 10; x.dstLat = 2 * time.Millisecond }), false, DestLatency, false},
		{"slow link, destination slow per file but idle", later(func(x *sample) { x.send = 4 * s * 9 / 10; x.cpu = s / 10; x.dstLat = 2 * time.Millisecond }), false, Network, false},
	}
	for _, c := range cases {
		v := decide(base, c.b, 2, c.local)
		if v.Resource != c.want || v.MoreStreamsHelp != c.more {
			t.Errorf("%s: got %s (more streams help: %v), want %s (%v); %s %v", c.name, v.Resource, v.MoreStreamsHelp, c.want, c.more, v.Why, v.Shares)
		}
	}
}

// TestShardLabel: a job of --shard 3/16 labels every bulkmove_* series
// shard="3/16", so that the senders of one tree can be told apart and
// summed; the Go and process series stay as they are.
func TestShardLabel(t *testing.T) {
	j := NewJob(2)
	j.Shard = "3/16"
	mfs, err := j.Registry("test").Gather()
	if err != nil {
		t.Fatal(err)
	}
	ours := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			shard := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "shard" {
					shard = l.GetValue()
				}
			}
			switch {
			case strings.HasPrefix(mf.GetName(), "bulkmove_"):
				ours++
				if shard != "3/16" {
					t.Errorf("%s %v: shard %q, want 3/16", mf.GetName(), m.GetLabel(), shard)
				}
			case shard != "":
				t.Errorf("%s has a shard label", mf.GetName())
			}
		}
	}
	if ours < 10 {
		t.Fatalf("only %d bulkmove_ series", ours)
	}
}
