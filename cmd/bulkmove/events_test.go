package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/bulkmove/bulkmove/internal/engine"
)

// TestJSONEvents validates every event of a --json run against the
// documented schema (the event types of events.go): known type, no unknown
// field, every field present, start first and end last with the exit code.
func TestJSONEvents(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	for _, n := range []string{"a", "sub/b", "blocked"} {
		os.WriteFile(filepath.Join(src, n), []byte(n), 0o644)
	}
	syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644)
	os.MkdirAll(filepath.Join(dst, "blocked", "x"), 0o755) // a directory in the way: an error event
	var stdout, stderr bytes.Buffer
	code := run([]string{"--json", "-j", "2", src, dst}, nil, &stdout, &stderr)
	if code != exitPartial {
		t.Fatalf("exit %d, want %d\n%s", code, exitPartial, stderr.String())
	}
	schema := map[string]any{
		"start": engine.StartEvent{}, "progress": engine.ProgressEvent{}, "warning": engine.ProblemEvent{}, "error": engine.ProblemEvent{},
		"bottleneck": engine.BottleneckEvent{}, "streams": engine.StreamsEvent{}, "end": engine.EndEvent{},
	}
	var types []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := sc.Bytes()
		var head engine.Head
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		proto, ok := schema[head.Type]
		if !ok {
			t.Fatalf("unknown event type %q: %s", head.Type, line)
		}
		ev := reflect.New(reflect.TypeOf(proto)).Interface()
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(ev); err != nil {
			t.Errorf("%s event does not match its schema: %v: %s", head.Type, err, line)
		}
		var fields map[string]any
		json.Unmarshal(line, &fields)
		for _, name := range jsonFields(reflect.TypeOf(proto)) {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s event lacks %q: %s", head.Type, name, line)
			}
		}
		if head.Time < 1e9 {
			t.Errorf("%s event has time %v", head.Type, head.Time)
		}
		types = append(types, head.Type)
		switch e := ev.(type) {
		case *engine.EndEvent:
			if e.ExitCode != code || e.Files != 2 || e.Errors != 1 || len(e.Streams) != 2 {
				t.Errorf("end event %+v, want exit %d, 2 files, 1 error, 2 streams", e, code)
			}
		case *engine.ProblemEvent:
			if head.Type == "warning" && e.Path != "fifo" || head.Type == "error" && e.Path != "blocked" {
				t.Errorf("%s event names %q: %s", head.Type, e.Path, line)
			}
		}
	}
	got := strings.Join(types, " ")
	if !strings.HasPrefix(got, "start ") || !strings.HasSuffix(got, " end") ||
		!strings.Contains(got, "warning") || !strings.Contains(got, "error") || !strings.Contains(got, "progress") {
		t.Errorf("event sequence %q: want start first, end last, a warning, an error and progress", got)
	}
}

// jsonFields lists the JSON names of a struct's fields, engine.Head's included,
// except those marked omitempty.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || strings.Contains(opts, "omitempty") {
			continue
		}
		out = append(out, name)
	}
	return out
}
