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

// TestReceiverCPUOncePerProcess: streams served by one agent report its
// CPU time once, under the process's name, not once per stream (summed,
// K times too much); streams of two agents give two series.
func TestReceiverCPUOncePerProcess(t *testing.T) {
	j := NewJob(3)
	a, b := "agent-a", "agent-b"
	for i, p := range []*string{&a, &a, &b} {
		j.Streams[i].RecvProcess.Store(p)
	}
	j.Streams[0].RecvCPUNanos.Store(2e9)
	j.Streams[1].RecvCPUNanos.Store(3e9) // a later ack of the same process
	j.Streams[2].RecvCPUNanos.Store(1e9)
	want := `
# HELP bulkmove_receiver_cpu_seconds_total CPU time of each receiving process (an agent or a serve session), once per process whatever the streams it serves: the label receiver names it.
# TYPE bulkmove_receiver_cpu_seconds_total counter
bulkmove_receiver_cpu_seconds_total{receiver="agent-a"} 3
bulkmove_receiver_cpu_seconds_total{receiver="agent-b"} 1
`
	if err := testutil.GatherAndCompare(j.Registry("test"), strings.NewReader(want), "bulkmove_receiver_cpu_seconds_total"); err != nil {
		t.Error(err)
	}
}

// TestDecideBwLimit: a job that moves at its bandwidth limit is limited
// by it, whatever its streams wait on (the bucket's wait counts as
// blocked sending), and more streams would not help; below the limit the
// resources are judged as without one.
func TestDecideBwLimit(t *testing.T) {
	s := time.Second.Nanoseconds()
	t0 := time.Unix(0, 0)
	a := sample{at: t0, active: 4, limit: 1 << 20}
	at := func(wire, copied int64) sample {
		return sample{at: t0.Add(time.Second), active: 4, send: 4 * s * 7 / 10, cpu: s / 10, limit: 1 << 20, wire: wire, copied: copied}
	}
	for _, c := range []struct {
		name string
		b    sample
		want string
		more bool
	}{
		{"at the limit", at(1<<20-1000, 0), BwLimit, false},
		{"local copy at the limit", at(0, 1<<20), BwLimit, false},
		{"under the limit", at(1<<18, 0), Network, true},
	} {
		v := decide(a, c.b, 2, false)
		if v.Resource != c.want || v.MoreStreamsHelp != c.more {
			t.Errorf("%s: got %s (more streams help: %v), want %s (%v); %s", c.name, v.Resource, v.MoreStreamsHelp, c.want, c.more, v.Why)
		}
	}
}

// TestOutcome: while the job runs it exports running 1 and the run
// before it (read back from its textfile); at its end its own outcome,
// keeping the last success of the run before if it failed.
func TestOutcome(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/job.prom"
	j := NewJob(1)
	j.Start = time.Unix(1000, 0)
	j.Failed.Store(2)
	j.End(0, time.Unix(1060, 0))
	if err := WriteTextfile(path, j.FileRegistry("test")); err != nil {
		t.Fatal(err)
	}
	prev, err := ReadOutcome(path, "")
	if err != nil || prev == nil {
		t.Fatalf("ReadOutcome: %v, %v", prev, err)
	}
	if prev.ExitCode != 0 || prev.Duration != time.Minute || prev.FilesFailed != 2 || !prev.LastSuccess.Equal(time.Unix(1060, 0)) {
		t.Errorf("read back %+v", *prev)
	}
	k := NewJob(1)
	k.SetPrevious(prev)
	want := `
# HELP bulkmove_job_running 1 while the job runs; 0 in what it writes at its end (--metrics-textfile, --pushgateway).
# TYPE bulkmove_job_running gauge
bulkmove_job_running 1
# HELP bulkmove_job_last_exit_code The exit code of the job's last finished run (while a run goes on: the one before it, from the previous --metrics-textfile).
# TYPE bulkmove_job_last_exit_code gauge
bulkmove_job_last_exit_code 0
`
	if err := testutil.GatherAndCompare(k.Registry("test"), strings.NewReader(want), "bulkmove_job_running", "bulkmove_job_last_exit_code"); err != nil {
		t.Error(err)
	}
	k.End(3, time.Now())
	want = `
# HELP bulkmove_job_running 1 while the job runs; 0 in what it writes at its end (--metrics-textfile, --pushgateway).
# TYPE bulkmove_job_running gauge
bulkmove_job_running 0
# HELP bulkmove_job_last_exit_code The exit code of the job's last finished run (while a run goes on: the one before it, from the previous --metrics-textfile).
# TYPE bulkmove_job_last_exit_code gauge
bulkmove_job_last_exit_code 3
# HELP bulkmove_job_last_success_timestamp_seconds When a run of the job last ended with exit code 0, Unix time (kept across runs: read back from the previous --metrics-textfile).
# TYPE bulkmove_job_last_success_timestamp_seconds gauge
bulkmove_job_last_success_timestamp_seconds 1060
`
	if err := testutil.GatherAndCompare(k.FileRegistry("test"), strings.NewReader(want), "bulkmove_job_running", "bulkmove_job_last_exit_code", "bulkmove_job_last_success_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	// Another shard's series are not this job's.
	if o, err := ReadOutcome(path, "1/2"); o != nil || err != nil {
		t.Errorf("ReadOutcome for another shard: %+v, %v", o, err)
	}
	if o, err := ReadOutcome(dir+"/none.prom", ""); o != nil || err != nil {
		t.Errorf("ReadOutcome of no file: %+v, %v", o, err)
	}
}
