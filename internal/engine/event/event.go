// Package event holds the --json events that more than one part of the
// engine writes or reads, and the writer of them all: Head, which starts
// every event; ProblemEvent, a warning, error or difference about one
// path; VerifyEvent, the end of a verify run; and Writer, which puts one
// event per line on stdout; EndEvent, the last event of a job, and
// WriteUsageEnd, which writes one for a command line that made no job.
//
// The engine writes its events through a Writer, and so do the packages
// below it (internal/engine/verify, whose bulkmove verify-summary also
// reads them back); cmd/bulkmove writes the end event of a command line
// it refuses. The rest of the schema (start, progress, ...) is in
// internal/engine's events.go, which names these types too;
// docs/observability.md documents them all and docs/events.schema.json
// is their JSON Schema. It imports nothing of the project: it is a leaf
// that the engine and its packages share.
package event

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"sync"
	"time"
	"unicode/utf8"
)

// Schema is the version of the events' format, in every event: it
// changes when a field changes meaning, type or goes away (a new field
// or event type keeps it), so that a script can refuse a format it was
// not written for. docs/events.schema.json describes this version.
const Schema = 1

// Head starts every event.
type Head struct {
	Type   string  `json:"type"`   // start, progress, warning, error, bottleneck, streams, end
	Schema int     `json:"schema"` // Schema
	Time   float64 `json:"time"`   // Unix seconds
}

// ProblemEvent is a warning or an error about one path. JSON strings are
// UTF-8: encoding/json writes each byte of a name that is not valid UTF-8
// as U+FFFD, so such a name also comes whole, base64, in PathB64.
type ProblemEvent struct {
	Head
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"` // the path's exact bytes, only when they are not valid UTF-8
	Message string `json:"message"`
}

// ItemEvent is one entry a move changed, with -i (--itemize-changes):
// rsync's code for it (">f.st......", "cd+++++++++", "*deleting").
type ItemEvent struct {
	Head
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"` // the path's exact bytes, only when they are not valid UTF-8
	Item    string `json:"item"`
	Link    string `json:"link,omitempty"` // a symlink's target, or the file a hard link links to
}

// ExactPath is the path's bytes: PathB64's if it is set.
func (e *ProblemEvent) ExactPath() string {
	if e.PathB64 != "" {
		if b, err := base64.StdEncoding.DecodeString(e.PathB64); err == nil {
			return string(b)
		}
	}
	return e.Path
}

// VerifyEvent ends `bulkmove verify --json`: what was compared and found
// (the differences themselves are "difference" events before it).
// `bulkmove verify-summary` merges those of several shards.
type VerifyEvent struct {
	Head
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Shard    string `json:"shard,omitempty"` // i/N with --shard
	Content  bool   `json:"content"`         // content compared, not only metadata
	Compared int64  `json:"compared"`
	Differ   int64  `json:"differ"`
	Missing  int64  `json:"missing"`
	Extra    int64  `json:"extra"`
	Errors   int64  `json:"errors"` // entries the walk could not read
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// EndEvent is the last event of a job: its summary, and its exit code.
// Every job with --json ends with one, also one refused before it
// started (then with its error, and zero counts).
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
	DryRun        bool          `json:"dry_run,omitempty"` // --dry-run: nothing moved
	Stats         *Stats        `json:"stats,omitempty"`   // --stats
}

// Stats is rsync's --stats, with --json: its figures that bulkmove has
// (docs/rsync.md). A dry run knows what SRC holds and what --delete would
// remove, not what would be made or sent: those are left out.
type Stats struct {
	Files           Kinds    `json:"files"`                       // Number of files
	Created         *Kinds   `json:"created,omitempty"`           // Number of created files
	Deleted         Kinds    `json:"deleted"`                     // Number of deleted files
	Transferred     *int64   `json:"transferred_files,omitempty"` // Number of regular files transferred
	TotalSize       int64    `json:"total_size"`                  // Total file size
	TransferredSize *int64   `json:"transferred_size,omitempty"`  // Total transferred file size
	LiteralData     *int64   `json:"literal_data,omitempty"`      // Literal data
	MatchedData     *int64   `json:"matched_data,omitempty"`      // Matched data: what the block delta did not send
	BytesSent       *int64   `json:"bytes_sent,omitempty"`        // Total bytes sent
	BytesReceived   *int64   `json:"bytes_received,omitempty"`    // Total bytes received
	BytesPerSecond  *float64 `json:"bytes_per_second,omitempty"`  // (sent + received) a second
	Speedup         *float64 `json:"speedup,omitempty"`           // total size / (sent + received); none when nothing went
}

// Kinds counts entries by kind, as rsync's "N (reg: R, dir: D, link: L,
// dev: V, special: S)": regular files and hard links, directories,
// symlinks, devices, FIFOs and sockets (-D), adding up to Total.
type Kinds struct {
	Total   int64 `json:"total"`
	Reg     int64 `json:"reg"`
	Dir     int64 `json:"dir"`
	Link    int64 `json:"link"`
	Dev     int64 `json:"dev"`
	Special int64 `json:"special"`
}

// StreamTotal is one stream's share in the summary.
type StreamTotal struct {
	Stream  int     `json:"stream"`
	Batches int64   `json:"batches"`
	Files   int64   `json:"files"`
	Bytes   int64   `json:"bytes"`
	Busy    float64 `json:"busy_seconds"`
}

// NoBottleneck is an end event's bottleneck when nothing was measured
// (metrics.Idle's value: this package imports nothing of the project).
const NoBottleneck = "none"

// Refused is the end event of a job that did not start (or of a command
// line that made none): err, its exit code, and elapsed seconds since
// it was begun; every count zero.
func Refused(err error, code int, elapsed float64) *EndEvent {
	e := &EndEvent{Elapsed: elapsed, Bottleneck: NoBottleneck, Streams: []StreamTotal{}, ExitCode: code}
	if err != nil {
		e.Error = err.Error()
	}
	return e
}

// Rate is n a second over seconds, 0 when no time went by (JSON has no
// infinity).
func Rate(n int64, seconds float64) float64 {
	r := float64(n) / seconds
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	return r
}

// WriteUsageEnd writes on w (stdout, with --json) the end event of a
// command line refused before a job was made, a usage error (bad flags,
// a missing operand) whose exit code is code, with err's message: so
// that a script reading the events always gets an end event.
func WriteUsageEnd(w io.Writer, err error, code int) {
	ev := Refused(err, code, 0)
	NewWriter(w).Emit("end", &ev.Head, ev)
}

// Writer writes events, one JSON object a line; a nil *Writer writes
// nothing, so that code without --json calls it all the same.
type Writer struct {
	mu    sync.Mutex
	enc   *json.Encoder
	out   io.Writer
	ended bool // an end (or verify) event went out
}

// NewWriter returns a Writer of events on w.
func NewWriter(w io.Writer) *Writer {
	enc := json.NewEncoder(w)
	// Not for a web page: <, > and & as they are (-i's ">f+++++++++",
	// paths), not as \u003e.
	enc.SetEscapeHTML(false)
	return &Writer{enc: enc, out: w}
}

// Emit writes an event; h points at its Head, whose Type is set and Time
// filled in here.
func (w *Writer) Emit(typ string, h *Head, ev any) {
	if w == nil {
		return
	}
	h.Type, h.Schema, h.Time = typ, Schema, float64(time.Now().UnixNano())/1e9
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enc.Encode(ev)
	w.ended = w.ended || typ == "end" || typ == "verify"
}

// Ended says whether the last event of a job (end, or verify's) was
// written: the engine writes one for a job that stopped before its own.
func (w *Writer) Ended() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

// Item writes an ItemEvent: entry path changed as rsync's code item says
// (-i); link is a symlink's target or a hard link's file, or "".
func (w *Writer) Item(path, item, link string) {
	if w == nil {
		return
	}
	ev := &ItemEvent{Path: path, Item: item, Link: link}
	if !utf8.ValidString(path) {
		ev.PathB64 = base64.StdEncoding.EncodeToString([]byte(path))
	}
	w.Emit("item", &ev.Head, ev)
}

// Problem writes a ProblemEvent of type typ (warning, error, difference)
// about path.
func (w *Writer) Problem(typ, path, msg string) {
	if w == nil {
		return
	}
	ev := &ProblemEvent{Path: path, Message: msg}
	if !utf8.ValidString(path) {
		ev.PathB64 = base64.StdEncoding.EncodeToString([]byte(path))
	}
	w.Emit(typ, &ev.Head, ev)
}

// Relay writes line, an event another bulkmove wrote (a remote-to-remote
// move's sender), as it is, and notes whether it ended the job.
func (w *Writer) Relay(line []byte) {
	if w == nil {
		return
	}
	var h Head
	json.Unmarshal(line, &h)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out.Write(line)
	w.ended = w.ended || h.Type == "end" || h.Type == "verify"
}
