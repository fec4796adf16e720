package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
)

// TestProgressRateAndETA follows a job's progress events as batches are
// acknowledged: the rate is over the last 5 s, so a second without an
// acknowledgement (a --bwlimit's pacing, a big batch) does not show as 0,
// nor a burst as its peak; the ETA is null while the walk goes on, then
// what is left at the pace of the last 5 s.
func TestProgressRateAndETA(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	ev := newEvents(&out)
	ev.clock = func() time.Time { return now }
	m := metrics.NewJob(1)
	m.Start = t0
	const mb = 1 << 20
	// The walk plans 100 batches of 10 MiB, one file each; one is
	// acknowledged a second.
	batch := &model.Batch{Bytes: 10 * mb, Entries: []model.Entry{{Path: "f", Size: 10 * mb}}}
	m.PlannedBytes.Store(100 * 10 * mb)
	m.PlannedFiles.Store(100)
	ack := func(at time.Duration) *ProgressEvent {
		now = t0.Add(at)
		m.DoneBytes.Add(10 * mb)
		m.DoneFiles.Add(1)
		ev.settle(batch)
		out.Reset()
		ev.progress(m, false)
		return lastProgress(t, &out)
	}
	var p *ProgressEvent
	for i := 1; i <= 10; i++ {
		p = ack(time.Duration(i) * time.Second)
		if p.ETA != nil {
			t.Fatalf("at %ds, the walk not done: ETA %v, want null", i, *p.ETA)
		}
	}
	if p.BytesRate != 10*mb || p.FilesRate != 1 {
		t.Errorf("1 batch a second: %v bytes/s, %v files/s; want %d and 1", p.BytesRate, p.FilesRate, 10*mb)
	}
	// Nothing for 2 s, then the next: 3 batches in the last 5 s, not the
	// last second's 1.
	p = ack(13 * time.Second)
	if want := 3 * 10 * mb / 5.0; p.BytesRate < want*0.99 || p.BytesRate > want*1.01 {
		t.Errorf("after a 2 s pause: %v bytes/s, want about %v (3 batches over 5 s)", p.BytesRate, want)
	}
	m.WalkDone.Store(true)
	p = ack(14 * time.Second)
	if p.ETA == nil {
		t.Fatalf("walk done: no ETA")
	}
	// 3 batches settled over the last 5 s (at 10, 13 and 14 s), 87
	// left: 145 s.
	if *p.ETA < 140 || *p.ETA > 150 {
		t.Errorf("ETA %v s, want about 145 (87 batches left at 3 in 5 s)", *p.ETA)
	}
	// Throttled: no event less than 500 ms after the last.
	now = now.Add(100 * time.Millisecond)
	out.Reset()
	ev.progress(m, false)
	if out.Len() != 0 {
		t.Errorf("a progress event 100 ms after the last: %s", out.String())
	}
}

func lastProgress(t *testing.T, out *bytes.Buffer) *ProgressEvent {
	t.Helper()
	var p *ProgressEvent
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		p = new(ProgressEvent)
		if err := json.Unmarshal(sc.Bytes(), p); err != nil {
			t.Fatalf("%q: %v", sc.Bytes(), err)
		}
		if p.Type != "progress" || p.Schema != 1 {
			t.Fatalf("event %s: want progress, schema 1", sc.Bytes())
		}
	}
	if p == nil {
		t.Fatalf("no progress event")
	}
	return p
}
