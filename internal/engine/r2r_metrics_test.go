package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
)

// exported is what m's textfile holds, but for the series that depend
// on the time they are read at (the ETA).
func exported(t *testing.T, m *metrics.Job) string {
	t.Helper()
	mfs, err := m.FileRegistry("test").Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if mf.GetName() == "bulkmove_job_eta_seconds" {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// busyJob is a box1 job's figures in the middle of a move: two of its
// four streams at work, each counter with a figure of its own.
func busyJob() *metrics.Job {
	m := metrics.NewJob(4)
	m.AutoJ.InUse.Store(2)
	m.AutoJ.Target.Store(2)
	for _, d := range []string{"add", "add", "remove", "stop"} { // -j auto's decisions
		m.AutoJ.Decided(d)
	}
	m.Limit = ratelimit.NewAdjustable(2 << 20)
	m.PlannedBytes.Store(9 << 20)
	m.PlannedFiles.Store(12)
	m.DoneBytes.Store(5 << 20)
	m.DoneFiles.Store(7)
	m.Skipped.Store(3)
	m.Failed.Store(1)
	m.SetVerdict(&metrics.Verdict{Resource: metrics.BwLimit, MoreStreamsHelp: true})
	agent := "agent@box2"
	for i, s := range m.Streams[:2] {
		n := int64(i + 1)
		s.BytesSent.Store(n << 20)
		s.FilesSent.Store(n * 3)
		s.Batches.Store(n * 2)
		s.Retries.Store(n)
		s.ReadNanos.Store(n * 1_500_000_000)
		s.SendNanos.Store(n * 2_500_000_000)
		s.WaitNanos.Store(n * 3_500_000_000)
		s.IdleNanos.Store(n * 4_500_000_000)
		s.WireBytes.Store(n<<20 + 4096)
		s.CompressIn.Store(n << 19)
		s.CompressOut.Store(n << 18)
		s.Compressing.Store(i == 0)
		s.RecvBytes.Store(n << 20)
		s.RecvFiles.Store(n * 3)
		s.RecvWriteNanos.Store(n * 700_000_000)
		s.RecvFsyncNanos.Store(n * 300_000_000)
		s.RecvCPUNanos.Store(2_000_000_000)
		s.RecvProcess.Store(&agent)
		s.Active.Store(true)
	}
	return m
}

// TestR2RStatusExports: the control host's exporter, fed box1's
// progress line (as JSON, as it crosses), has every series of box1's
// own exporter with box1's figures: the per-stream timings, the
// receiver's figures, the bandwidth limit, the bottleneck verdict; only
// the streams at work, as box1's. The progress line it draws is box1's.
func TestR2RStatusExports(t *testing.T) {
	box1 := busyJob()
	// The line box1's display would draw (cmd/bulkmove's smoother makes it).
	line := progressline.Job{PlannedBytes: box1.PlannedBytes.Load(), DoneBytes: box1.DoneBytes.Load(), Files: 10, Fraction: 0.5, Rate: 1 << 20,
		ETA: 4 * time.Second, Streams: 2, Limit: box1.Limit.Rate(), Zstd: 50, Bottleneck: box1.Verdict().Resource}
	b, err := json.Marshal(statusOf(line, box1))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the progress line: %d bytes", len(b))
	var st r2rStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Job != line {
		t.Errorf("the control host draws %+v, want %+v", st.Job, line)
	}
	ctl := newMeasure(4)
	ctl.Start = box1.Start
	st.measure(ctl)
	want, got := exported(t, box1), exported(t, ctl)
	if got != want {
		t.Errorf("the control host exports\n%s\nbox1 exports\n%s", got, want)
	}
	for _, s := range []string{`bulkmove_stream_read_seconds_total{stream="1"} 3`, `bulkmove_bottleneck{resource="bwlimit"} 1`, `bulkmove_bwlimit_bytes_per_second 2.097152e+06`,
		`bulkmove_streams_decisions_total{action="add"} 2`, `bulkmove_streams_decisions_total{action="stop"} 1`} {
		if !strings.Contains(got, s+"\n") {
			t.Errorf("the control host's exporter lacks %s", s)
		}
	}
	if strings.Contains(got, `stream="2"`) {
		t.Errorf("the control host exports a stream box1 did not use")
	}
}

// TestR2RStatusOlderSender: the progress line of a box1 that sends only
// each stream's bytes, files and batches gives those, the bandwidth limit
// and the verdict's resource its progress line has, and zeros for the
// rest; a new box1's line keeps those fields for an older control host.
func TestR2RStatusOlderSender(t *testing.T) {
	old := `{"DoneBytes":4,"PlannedBytes":10,"Files":1,"Fraction":0.4,"WalkDone":true,"Rate":4,"FileRate":1,"ETA":-1,"Streams":1,"Limit":1024,"Zstd":-1,"Bottleneck":"network",` +
		`"PlannedFiles":2,"DoneFiles":1,"Skipped":0,"Failed":0,"Sent":[{"Bytes":4,"Files":1,"Batches":1}]}`
	var st r2rStatus
	if err := json.Unmarshal([]byte(old), &st); err != nil {
		t.Fatal(err)
	}
	ctl := newMeasure(2)
	st.measure(ctl)
	got := exported(t, ctl)
	for _, s := range []string{`bulkmove_stream_sent_bytes_total{stream="0"} 4`, `bulkmove_stream_batches_total{stream="0"} 1`,
		`bulkmove_stream_read_seconds_total{stream="0"} 0`, `bulkmove_bottleneck{resource="network"} 1`, `bulkmove_more_streams_would_help 0`,
		`bulkmove_bwlimit_bytes_per_second 1024`, `bulkmove_job_done_bytes_total 4`} {
		if !strings.Contains(got, s+"\n") {
			t.Errorf("the control host's exporter lacks %s:\n%s", s, got)
		}
	}
	b, _ := json.Marshal(statusOf(progressline.Job{}, busyJob()))
	var older struct {
		Sent []struct{ Bytes, Files, Batches int64 }
	}
	if err := json.Unmarshal(b, &older); err != nil || len(older.Sent) != 2 || older.Sent[1].Bytes != 2<<20 || older.Sent[1].Files != 6 || older.Sent[1].Batches != 4 {
		t.Errorf("an older control host reads %+v (%v) from %s", older, err, b)
	}
}
