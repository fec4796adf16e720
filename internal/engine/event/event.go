// Package event holds the --json events that more than one part of the
// engine writes or reads, and the writer of them all: Head, which starts
// every event; ProblemEvent, a warning, error or difference about one
// path; VerifyEvent, the end of a verify run; and Writer, which puts one
// event per line on stdout.
//
// The engine writes its events through a Writer, and so do the packages
// below it (internal/engine/verify, whose bulkmove verify-summary also
// reads them back). The rest of the schema (start, progress, end, ...)
// is in internal/engine's events.go, which names these types too;
// docs/observability.md documents them all. It imports nothing of the
// project: it is a leaf that the engine and its packages share.
package event

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// Head starts every event.
type Head struct {
	Type string  `json:"type"` // start, progress, warning, error, bottleneck, streams, end
	Time float64 `json:"time"` // Unix seconds
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

// Writer writes events, one JSON object a line; a nil *Writer writes
// nothing, so that code without --json calls it all the same.
type Writer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewWriter returns a Writer of events on w.
func NewWriter(w io.Writer) *Writer { return &Writer{enc: json.NewEncoder(w)} }

// Emit writes an event; h points at its Head, whose Type is set and Time
// filled in here.
func (w *Writer) Emit(typ string, h *Head, ev any) {
	if w == nil {
		return
	}
	h.Type, h.Time = typ, float64(time.Now().UnixNano())/1e9
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enc.Encode(ev)
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
