package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// eventsSchemaFile is the JSON Schema of the --json events, as the docs
// publish it.
const eventsSchemaFile = "../../docs/events.schema.json"

var eventsSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	f, err := os.Open(eventsSchemaFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("events.schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("events.schema.json")
})

// schemaEvents validates each line of out against docs/events.schema.json
// and returns the events, decoded.
func schemaEvents(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	sch, err := eventsSchema()
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	var evs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatalf("stdout has a line that is not JSON: %q: %v", sc.Bytes(), err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("event does not match docs/events.schema.json: %s\n%v", sc.Bytes(), err)
		}
		var ev map[string]any
		json.Unmarshal(sc.Bytes(), &ev)
		evs = append(evs, ev)
	}
	return evs
}

// TestJSONEventsSchema runs jobs with --json that succeed, fail in part,
// are refused before they start or on their command line, and dry runs,
// and checks every line of their stdout against the published schema:
// and that the last is the end event, with the exit code the process
// exits with.
func TestJSONEventsSchema(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	for _, n := range []string{"a", "sub/b", "blocked"} {
		os.WriteFile(filepath.Join(src, n), bytes.Repeat([]byte("x"), 1000), 0o644)
	}
	blocked := filepath.Join(dir, "blocked")
	os.MkdirAll(filepath.Join(blocked, "blocked", "x"), 0o755) // a directory in the way: an error event

	cases := []struct {
		name   string
		args   []string
		code   int
		types  string // the sequence of event types, progress and problems left out
		error  string // in the end event; "" none
		verify func(t *testing.T, end map[string]any, evs []map[string]any)
	}{
		{name: "done", args: []string{"-j", "2", src, filepath.Join(dir, "ok")}, code: exitOK, types: "start end",
			verify: func(t *testing.T, end map[string]any, evs []map[string]any) {
				if end["files"] != 3.0 || end["bytes"] != 3000.0 {
					t.Errorf("end event: %v, want 3 files, 3000 bytes", end)
				}
				last := lastOf(evs, "progress")
				if last == nil || last["planned_files"] != 3.0 || last["walk_done"] != true || last["eta_seconds"] != 0.0 {
					t.Errorf("last progress event %v: want the 3 files planned, the walk done, 0 s left", last)
				}
			}},
		{name: "stats", args: []string{"--stats", "--delete", src, filepath.Join(dir, "st")}, code: exitOK, types: "start end",
			verify: func(t *testing.T, end map[string]any, _ []map[string]any) {
				st, _ := end["stats"].(map[string]any)
				files, _ := st["files"].(map[string]any)
				created, _ := st["created"].(map[string]any)
				// SRC: ., sub, a, sub/b, blocked.
				if files["total"] != 5.0 || files["reg"] != 3.0 || files["dir"] != 2.0 || created["total"] != 5.0 ||
					st["transferred_files"] != 3.0 || st["total_size"] != 3000.0 || st["literal_data"] != 3000.0 {
					t.Errorf("end event's stats %v: want 5 files (3 regular, 2 directories), all created, 3 transferred, 3000 bytes", st)
				}
			}},
		{name: "stats, dry run", args: []string{"--stats", "-n", src, filepath.Join(dir, "st2")}, code: exitOK, types: "start end",
			verify: func(t *testing.T, end map[string]any, _ []map[string]any) {
				st, _ := end["stats"].(map[string]any)
				if st["total_size"] != 3000.0 || st["created"] != nil {
					t.Errorf("a dry run's stats %v: want the total size, nothing on what would be made", st)
				}
			}},
		{name: "partial", args: []string{"-j", "2", src, blocked}, code: exitPartial, types: "start error end",
			verify: func(t *testing.T, end map[string]any, _ []map[string]any) {
				if end["errors"] != 1.0 {
					t.Errorf("end event: %v, want 1 error", end)
				}
			}},
		{name: "missing SRC", args: []string{filepath.Join(dir, "nowhere"), filepath.Join(dir, "d1")}, code: exitFatal, types: "end",
			error: "source " + filepath.Join(dir, "nowhere") + ": no such file or directory"},
		{name: "DEST inside SRC", args: []string{src, filepath.Join(src, "sub", "in")}, code: exitUsage, types: "end", error: "inside"},
		{name: "one operand", args: []string{src}, code: exitUsage, types: "end", error: "want SRC and DEST, got 1 arguments"},
		{name: "dry run", args: []string{"--dry-run", src, filepath.Join(dir, "d2")}, code: exitOK, types: "start end",
			verify: func(t *testing.T, end map[string]any, evs []map[string]any) {
				if end["dry_run"] != true {
					t.Errorf("end event %v: want dry_run", end)
				}
				if p := lastOf(evs, "progress"); p == nil || p["planned_files"] != 3.0 || p["planned_bytes"] != 3000.0 {
					t.Errorf("progress event %v: want the 3 files, 3000 bytes planned", p)
				}
				if _, err := os.Stat(filepath.Join(dir, "d2")); err == nil {
					t.Errorf("the dry run made DEST")
				}
			}},
		{name: "unknown flag", args: []string{"--delte", src, filepath.Join(dir, "d4")}, code: exitUsage, types: "end",
			error: "unknown flag --delte; did you mean --delete?"},
		{name: "bad value", args: []string{"--progress=bogus", src, filepath.Join(dir, "d4")}, code: exitUsage, types: "end",
			error: `invalid value "bogus" for --progress`},
		{name: "dry run, missing SRC", args: []string{"--dry-run", filepath.Join(dir, "nowhere"), filepath.Join(dir, "d3")}, code: exitFatal,
			types: "end", error: "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"--json"}, c.args...), nil, &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s", code, c.code, stderr.String())
			}
			evs := schemaEvents(t, stdout.Bytes())
			var types []string
			for _, ev := range evs {
				switch ev["type"] {
				case "progress", "warning", "bottleneck", "streams":
				case "error":
					if len(types) == 0 || types[len(types)-1] != "error" {
						types = append(types, "error")
					}
				default:
					types = append(types, ev["type"].(string))
				}
			}
			if got := strings.Join(types, " "); got != c.types {
				t.Fatalf("events %q, want %q\n%s", got, c.types, stdout.String())
			}
			end := evs[len(evs)-1]
			if end["exit_code"] != float64(code) {
				t.Errorf("end event's exit_code %v, the process's %d", end["exit_code"], code)
			}
			msg, _ := end["error"].(string)
			switch {
			case c.error == "" && msg != "":
				t.Errorf("end event's error %q, want none", msg)
			case !strings.Contains(msg, c.error):
				t.Errorf("end event's error %q, want %q", msg, c.error)
			case c.error != "" && !strings.Contains(stderr.String(), msg):
				t.Errorf("end event's error %q is not what stderr says:\n%s", msg, stderr.String())
			}
			if c.verify != nil {
				c.verify(t, end, evs)
			}
		})
	}
}

// lastOf is the last event of type typ in evs, nil if none.
func lastOf(evs []map[string]any, typ string) map[string]any {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i]["type"] == typ {
			return evs[i]
		}
	}
	return nil
}

// TestJSONVerifyEventsSchema checks the events of bulkmove verify --json
// against the schema: a verify that finds a difference, and one refused
// before it compared, whose verify event names the error.
func TestJSONVerifyEventsSchema(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(src, 0o755)
	os.MkdirAll(dst, 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644)
	for _, c := range []struct {
		dst   string
		code  int
		types string
		error string
	}{
		{dst, exitPartial, "difference verify", ""},
		{filepath.Join(dir, "nowhere"), exitFatal, "verify", "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"verify", "--json", src, c.dst}, nil, &stdout, &stderr)
		if code != c.code {
			t.Fatalf("verify %s: exit %d, want %d\n%s", c.dst, code, c.code, stderr.String())
		}
		evs := schemaEvents(t, stdout.Bytes())
		var types []string
		for _, ev := range evs {
			if typ := ev["type"].(string); len(types) == 0 || types[len(types)-1] != typ {
				types = append(types, typ)
			}
		}
		if got := strings.Join(types, " "); got != c.types {
			t.Fatalf("verify %s: events %q, want %q", c.dst, got, c.types)
		}
		end := evs[len(evs)-1]
		msg, _ := end["error"].(string)
		if end["exit_code"] != float64(code) || !strings.Contains(msg, c.error) || c.error == "" && msg != "" {
			t.Errorf("verify %s: verify event %v, want exit %d, error %q", c.dst, end, code, c.error)
		}
	}
}

// TestEventsSchemaStrict checks that the schema refuses what a script
// could not rely on: an event without its schema version, of an unknown
// type or version, a field of the wrong type, a field missing or one it
// does not know.
func TestEventsSchemaStrict(t *testing.T) {
	good := `{"type":"end","schema":1,"time":1700000000.5,"files":1,"bytes":2,"links":0,"skipped":0,"resumed":0,"errors":0,` +
		`"elapsed_seconds":0.1,"bytes_per_second":20,"files_per_second":10,"bottleneck":"none","wire_bytes":9,` +
		`"compressed_in_bytes":0,"compressed_out_bytes":0,"streams":[{"stream":0,"batches":1,"files":1,"bytes":2,"busy_seconds":0.1}],"exit_code":0}`
	progress := `{"type":"progress","schema":1,"time":1700000000.5,"files":1,"bytes":2,"skipped":0,"failed":0,"planned_files":3,` +
		`"planned_bytes":4,"walk_done":false,"elapsed_seconds":1,"bytes_per_second":2,"files_per_second":1,"eta_seconds":null}`
	if evs := schemaEvents(t, []byte(good+"\n"+progress+"\n")); len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	sch, _ := eventsSchema()
	for _, bad := range []struct{ what, from, to string }{
		{"no schema", `"schema":1,`, ``},
		{"another schema version", `"schema":1,`, `"schema":2,`},
		{"a count as a string", `"files":1,`, `"files":"1",`},
		{"a negative count", `"files":1,`, `"files":-1,`},
		{"an exit code that is none", `"exit_code":0`, `"exit_code":7`},
		{"a field missing", `"wire_bytes":9,`, ``},
		{"an unknown field", `"wire_bytes":9,`, `"wire_bytes":9,"wires":9,`},
		{"an unknown field in a stream", `"busy_seconds":0.1`, `"busy_seconds":0.1,"x":1`},
		{"an unknown type", `"type":"end"`, `"type":"ending"`},
		{"no time", `"time":1700000000.5,`, ``},
	} {
		line := strings.Replace(good, bad.from, bad.to, 1)
		if line == good {
			t.Fatalf("%s: %q is not in the event", bad.what, bad.from)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err != nil {
			t.Fatalf("%s: %v", bad.what, err)
		}
		if sch.Validate(v) == nil {
			t.Errorf("the schema takes an end event with %s: %s", bad.what, line)
		}
	}
	for _, bad := range []struct{ what, from, to string }{
		{"an ETA as a string", `"eta_seconds":null`, `"eta_seconds":"5"`},
		{"no ETA", `,"eta_seconds":null`, ``},
		{"a walk_done that is not a boolean", `"walk_done":false`, `"walk_done":0`},
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(strings.Replace(progress, bad.from, bad.to, 1)))
		if sch.Validate(v) == nil {
			t.Errorf("the schema takes a progress event with %s", bad.what)
		}
	}
}

// TestJSONProgressRate runs a move slowed by --bwlimit to 1 MiB/s for
// about 3 s: its progress events, valid, carry a rate near the limit
// (over the last 5 s: no event shows the rate of one batch's burst) and,
// once the walk is done, an ETA that counts down to 0.
func TestJSONProgressRate(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 s run")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	for i := range 48 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), bytes.Repeat([]byte{byte(i)}, 64<<10), 0o644)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"--json", "--journal", "none", "-j", "2", "--batch-files", "2", "--bwlimit", "1M", src, filepath.Join(dir, "dst")}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var etas []float64
	for _, ev := range schemaEvents(t, stdout.Bytes()) {
		if ev["type"] != "progress" {
			continue
		}
		if r := ev["bytes_per_second"].(float64); r > 2.5*(1<<20) {
			t.Errorf("progress at %.1fs: %.0f bytes/s under a 1 MiB/s limit", ev["elapsed_seconds"], r)
		}
		if eta, ok := ev["eta_seconds"].(float64); ok {
			etas = append(etas, eta)
		} else if ev["walk_done"] == true && ev["elapsed_seconds"].(float64) > 1 {
			t.Errorf("progress at %.1fs, the walk done: no ETA", ev["elapsed_seconds"])
		}
	}
	if len(etas) < 2 || etas[0] < 1 || etas[len(etas)-1] != 0 {
		t.Errorf("ETAs %v: want several, from seconds down to 0", etas)
	}
}

// TestJSONItemEvents: with -i and --json, each entry changed is an item
// event (the schema's), with rsync's code, and a deletion too; stdout
// holds events only.
func TestJSONItemEvents(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("b"), 0o644)
	os.Symlink("a", filepath.Join(src, "link"))
	items := func(args ...string) map[string]map[string]any {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"--json", "-i", "--journal", "none"}, args...), nil, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		got := map[string]map[string]any{}
		for _, ev := range schemaEvents(t, stdout.Bytes()) {
			if ev["type"] == "item" {
				got[ev["path"].(string)] = ev
			}
		}
		return got
	}
	got := items(src, dst)
	for path, want := range map[string]string{".": "cd+++++++++", "a": ">f+++++++++", "sub": "cd+++++++++", "sub/b": ">f+++++++++", "link": "cL+++++++++"} {
		if ev := got[path]; ev == nil || ev["item"] != want {
			t.Errorf("%s: item event %v, want %s", path, ev, want)
		}
	}
	if ev := got["link"]; ev == nil || ev["link"] != "a" {
		t.Errorf("link: item event %v, want its target a", ev)
	}
	if len(got) != 5 {
		t.Errorf("%d item events, want 5: %v", len(got), got)
	}
	os.Remove(filepath.Join(src, "sub", "b"))
	os.WriteFile(filepath.Join(dst, "sub", "stray"), []byte("x"), 0o644)
	if st, err := os.Stat(filepath.Join(src, "sub")); err == nil { // only the deletions show
		os.Chtimes(filepath.Join(dst, "sub"), st.ModTime(), st.ModTime())
	}
	got = items("--delete", src, dst)
	if ev := got["sub/stray"]; ev == nil || ev["item"] != "*deleting" || got["sub/b"] == nil || got["sub/b"]["item"] != "*deleting" {
		t.Errorf("after --delete: %v, want sub/b and sub/stray *deleting", got)
	}
}
