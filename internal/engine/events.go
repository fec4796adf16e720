package engine

import (
	"io"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
)

// Events of --json: one JSON object per line on stdout. docs/observability.md documents
// the schema and docs/events.schema.json is its JSON Schema; TestJSONEvents
// and TestJSONEventsSchema validate every event of real runs against these
// types. Those that the packages below the engine write or read too are
// in package event, and named here as well.

// Head starts every event.
type Head = event.Head

// ProblemEvent is a warning or an error about one path.
type ProblemEvent = event.ProblemEvent

// VerifyEvent ends `bulkmove verify --json`.
type VerifyEvent = event.VerifyEvent

// StartEvent opens a job.
type StartEvent struct {
	Head
	Version string `json:"version"`
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	Streams int    `json:"streams"` // requested (-j); fewer may connect
}

// ProgressEvent aggregates acknowledged batches, at most twice a second.
// The rates are over the last rateWindow (since the start, before), and
// ETA is null until the walk is done and something was settled.
type ProgressEvent struct {
	Head
	Files        int64    `json:"files"`
	Bytes        int64    `json:"bytes"`
	Skipped      int64    `json:"skipped"`
	Failed       int64    `json:"failed"`
	PlannedFiles int64    `json:"planned_files"`
	PlannedBytes int64    `json:"planned_bytes"`
	WalkDone     bool     `json:"walk_done"`
	Elapsed      float64  `json:"elapsed_seconds"`
	BytesRate    float64  `json:"bytes_per_second"`
	FilesRate    float64  `json:"files_per_second"`
	ETA          *float64 `json:"eta_seconds"`
}

// BottleneckEvent says the verdict changed.
type BottleneckEvent struct {
	Head
	Resource        string  `json:"resource"`
	MoreStreamsHelp bool    `json:"more_streams_help"`
	Why             string  `json:"why"`
	Share           float64 `json:"share"`
}

// EndEvent is the last event of a job, also of one refused before it
// started.
type EndEvent = event.EndEvent

// StreamTotal is one stream's share in the summary.
type StreamTotal = event.StreamTotal

// events writes --json events; a nil *events writes nothing.
type events struct {
	w  *event.Writer
	mu sync.Mutex // guards what follows
	// last is when the last progress event went out; window, the
	// progress of the last rateWindow, for its rates; settled, what the
	// acknowledged batches had planned, for its ETA.
	last    time.Time
	window  []sample
	settled work
	clock   func() time.Time // time.Now; a test's clock
}

// rateWindow is what a progress event's rates are measured over: long
// enough that they do not swing with each batch acknowledged (or with
// each second of a --bwlimit's pacing), short enough to follow a change.
const rateWindow = 5 * time.Second

// work is an amount of planned or settled work: bytes and files.
type work struct{ bytes, files int64 }

// cost weighs work as the sharder weighs batches: bytes, and a cost a
// file.
func (w work) cost() float64 { return float64(w.bytes + w.files*sharder.DefaultFileCost) }

// planned is the work the walk's batch b adds to the plan: its bytes
// but those of the files the resume journal named (most likely in place
// already), and its files but the later ranges of a split file.
func planned(b *model.Batch) work {
	w := work{bytes: b.Bytes}
	for i := range b.Entries {
		if e := &b.Entries[i]; e.Resumed {
			w.bytes -= e.Size
		}
		if b.Entries[i].Off == 0 {
			w.files++
		}
	}
	return w
}

// sample is where the job stood at a time: what it moved and settled.
type sample struct {
	at           time.Time
	bytes, files int64
	settled      float64 // work.cost
}

func newEvents(w io.Writer) *events { return &events{w: event.NewWriter(w)} }

// writer is where the events go, for the packages below the engine: nil
// without --json.
func (e *events) writer() *event.Writer {
	if e == nil {
		return nil
	}
	return e.w
}

// emit writes an event; h points at its Head, whose Type is set and Time
// filled in here.
func (e *events) emit(typ string, h *Head, ev any) { e.writer().Emit(typ, h, ev) }

// settle counts a walk's batch b as acknowledged: whatever became of its
// files (sent, up to date, failed), they are no longer ahead.
func (e *events) settle(b *model.Batch) {
	if e == nil {
		return
	}
	w := planned(b)
	e.mu.Lock()
	e.settled.bytes += w.bytes
	e.settled.files += w.files
	e.mu.Unlock()
}

// progress emits a progress event unless one went out less than 500 ms ago
// (force: always).
func (e *events) progress(m *metrics.Job, force bool) {
	if e == nil || m == nil {
		return
	}
	now := time.Now()
	if e.clock != nil {
		now = e.clock()
	}
	e.mu.Lock()
	if !force && now.Sub(e.last) < 500*time.Millisecond {
		e.mu.Unlock()
		return
	}
	e.last = now
	ev := &ProgressEvent{
		Files: m.DoneFiles.Load(), Bytes: m.DoneBytes.Load(), Skipped: m.Skipped.Load(), Failed: m.Failed.Load(),
		PlannedFiles: m.PlannedFiles.Load(), PlannedBytes: m.PlannedBytes.Load(), WalkDone: m.WalkDone.Load(),
		Elapsed: now.Sub(m.Start).Seconds(),
	}
	cur := sample{at: now, bytes: ev.Bytes, files: ev.Files, settled: e.settled.cost()}
	if len(e.window) == 0 {
		e.window = append(e.window, sample{at: m.Start})
	}
	e.window = append(e.window, cur)
	// Keep one sample at least rateWindow old, as the reference.
	for len(e.window) > 2 && now.Sub(e.window[1].at) >= rateWindow {
		e.window = e.window[1:]
	}
	ref := e.window[0]
	e.mu.Unlock()
	if dt := now.Sub(ref.at).Seconds(); dt > 0 {
		ev.BytesRate = float64(cur.bytes-ref.bytes) / dt
		ev.FilesRate = float64(cur.files-ref.files) / dt
		left := work{bytes: ev.PlannedBytes, files: ev.PlannedFiles}.cost() - cur.settled
		if pace := (cur.settled - ref.settled) / dt; ev.WalkDone && (pace > 0 || left <= 0) {
			eta := max(left, 0) / max(pace, 1)
			ev.ETA = &eta
		}
	}
	e.emit("progress", &ev.Head, ev)
}

// start emits the start event of job j.
func (e *events) start(j *job) {
	if e == nil {
		return
	}
	st := &StartEvent{Version: Version, Src: j.src, Dst: j.dst, Streams: j.flags.Jobs}
	e.emit("start", &st.Head, st)
}

// planned emits the progress event of a dry run: what its walk found,
// to move; the rates and the ETA of a run that moves nothing are 0 and
// unknown.
func (e *events) planned(files, bytes int64, elapsed time.Duration) {
	if e == nil {
		return
	}
	ev := &ProgressEvent{PlannedFiles: files, PlannedBytes: bytes, WalkDone: true, Elapsed: elapsed.Seconds()}
	e.emit("progress", &ev.Head, ev)
}

func (e *events) problem(typ, path, msg string) { e.writer().Problem(typ, path, msg) }

func (e *events) item(path, item, link string) { e.writer().Item(path, item, link) }

func (e *events) bottleneck(v *metrics.Verdict) {
	ev := &BottleneckEvent{Resource: v.Resource, MoreStreamsHelp: v.MoreStreamsHelp, Why: v.Why, Share: v.Shares[v.Resource]}
	e.emit("bottleneck", &ev.Head, ev)
}

func streamTotals(st []send.StreamStats) []StreamTotal {
	out := make([]StreamTotal, len(st))
	for i, s := range st {
		out[i] = StreamTotal{Stream: i, Batches: s.Batches, Files: s.Files, Bytes: s.Bytes, Busy: s.Done.Seconds()}
	}
	return out
}
