package engine

import (
	"io"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/send"
)

// Events of --json: one JSON object per line on stdout. docs/observability.md documents
// the schema; TestJSONEvents validates every event of a run against these
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
type ProgressEvent struct {
	Head
	Files        int64   `json:"files"`
	Bytes        int64   `json:"bytes"`
	Skipped      int64   `json:"skipped"`
	Failed       int64   `json:"failed"`
	PlannedFiles int64   `json:"planned_files"`
	PlannedBytes int64   `json:"planned_bytes"`
	WalkDone     bool    `json:"walk_done"`
	Elapsed      float64 `json:"elapsed_seconds"`
}

// BottleneckEvent says the verdict changed.
type BottleneckEvent struct {
	Head
	Resource        string  `json:"resource"`
	MoreStreamsHelp bool    `json:"more_streams_help"`
	Why             string  `json:"why"`
	Share           float64 `json:"share"`
}

// EndEvent is the final summary.
type EndEvent struct {
	Head
	Files      int64   `json:"files"`
	Bytes      int64   `json:"bytes"`
	Links      int64   `json:"links"`
	Skipped    int64   `json:"skipped"`
	Resumed    int64   `json:"resumed"` // of Skipped, those the resume journal named (found in place at DEST)
	Errors     int64   `json:"errors"`
	Elapsed    float64 `json:"elapsed_seconds"`
	BytesRate  float64 `json:"bytes_per_second"`
	FilesRate  float64 `json:"files_per_second"`
	Bottleneck string  `json:"bottleneck"`
	// What went on the wire: all the streams wrote (frames, tar and
	// compressed data), and the tar of compressed batches before and
	// after compression.
	WireBytes     int64         `json:"wire_bytes"`
	CompressedIn  int64         `json:"compressed_in_bytes"`
	CompressedOut int64         `json:"compressed_out_bytes"`
	Streams       []StreamTotal `json:"streams"`
	ExitCode      int           `json:"exit_code"`
	Error         string        `json:"error,omitempty"`
}

// StreamTotal is one stream's share in the summary.
type StreamTotal struct {
	Stream  int     `json:"stream"`
	Batches int64   `json:"batches"`
	Files   int64   `json:"files"`
	Bytes   int64   `json:"bytes"`
	Busy    float64 `json:"busy_seconds"`
}

// events writes --json events; a nil *events writes nothing.
type events struct {
	w    *event.Writer
	mu   sync.Mutex // guards last
	last time.Time
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

// progress emits a progress event unless one went out less than 500 ms ago
// (force: always).
func (e *events) progress(m *metrics.Job, force bool) {
	if e == nil || m == nil {
		return
	}
	e.mu.Lock()
	if !force && time.Since(e.last) < 500*time.Millisecond {
		e.mu.Unlock()
		return
	}
	e.last = time.Now()
	e.mu.Unlock()
	ev := &ProgressEvent{
		Files: m.DoneFiles.Load(), Bytes: m.DoneBytes.Load(), Skipped: m.Skipped.Load(), Failed: m.Failed.Load(),
		PlannedFiles: m.PlannedFiles.Load(), PlannedBytes: m.PlannedBytes.Load(), WalkDone: m.WalkDone.Load(),
		Elapsed: time.Since(m.Start).Seconds(),
	}
	e.emit("progress", &ev.Head, ev)
}

func (e *events) problem(typ, path, msg string) { e.writer().Problem(typ, path, msg) }

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
