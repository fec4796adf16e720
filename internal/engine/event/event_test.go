package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestWriteUsageEnd checks the end event of a refused command line: one
// line, the type, version, exit code and error a script reads, and a
// streams list that is empty, not null.
func TestWriteUsageEnd(t *testing.T) {
	var out bytes.Buffer
	WriteUsageEnd(&out, errors.New("unknown flag --bogus"), 1)
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Fatalf("%d lines, want 1: %q", n, out.String())
	}
	var ev map[string]any
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"type": "end", "schema": float64(Schema), "exit_code": 1.0, "error": "unknown flag --bogus",
		"files": 0.0, "bottleneck": NoBottleneck} {
		if ev[k] != want {
			t.Errorf("%s: %v, want %v (%s)", k, ev[k], want, out.String())
		}
	}
	if s, ok := ev["streams"].([]any); !ok || len(s) != 0 {
		t.Errorf("streams: %v, want []", ev["streams"])
	}
	if tm, _ := ev["time"].(float64); tm < 1e9 {
		t.Errorf("time %v", ev["time"])
	}
}

// TestRate checks that a rate over no time is 0, which JSON can carry,
// not NaN or infinity, which would make encoding/json drop the event.
func TestRate(t *testing.T) {
	for _, c := range []struct {
		n    int64
		s    float64
		want float64
	}{{10, 2, 5}, {0, 0, 0}, {10, 0, 0}} {
		if got := Rate(c.n, c.s); got != c.want {
			t.Errorf("Rate(%d, %v) = %v, want %v", c.n, c.s, got, c.want)
		}
	}
	var out bytes.Buffer
	ev := Refused(nil, 0, 0)
	ev.BytesRate = Rate(5, 0)
	NewWriter(&out).Emit("end", &ev.Head, ev)
	if out.Len() == 0 {
		t.Errorf("the event was not written")
	}
}
