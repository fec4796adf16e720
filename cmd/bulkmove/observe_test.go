package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTextfileAndPush: --metrics-textfile leaves the final metrics in the
// file (and no temporary beside it), --pushgateway pushes them under the
// job name with an instance label.
func TestTextfileAndPush(t *testing.T) {
	gw, pushes := fakePushgateway(t)
	dir, src := oneFileTree(t)
	prom := filepath.Join(dir, "out", "bulkmove.prom")
	os.MkdirAll(filepath.Dir(prom), 0o755)
	var stdout, stderr bytes.Buffer
	code := run([]string{"--metrics-textfile", prom, "--pushgateway", gw.URL, "--job-name", "nightly", src, filepath.Join(dir, "dst")}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bulkmove_job_done_files_total 1", "bulkmove_job_walk_done 1", "bulkmove_stream_sent_bytes_total{stream=\"0\"}"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("textfile lacks %q", want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(prom)); len(entries) != 1 {
		t.Errorf("textfile directory holds %d entries, want just the file", len(entries))
	}
	pushed, path, method := "", "", ""
	if ps := pushes(); len(ps) > 0 {
		pushed, path, method = ps[0].body, ps[0].path, ps[0].method
	}
	if method != http.MethodPut || !strings.HasPrefix(path, "/metrics/job/nightly/instance/") {
		t.Errorf("pushed with %s to %q, want PUT to /metrics/job/nightly/instance/HOST", method, path)
	}
	if pushed == "" {
		t.Error("nothing pushed")
	}
}

// TestOutcomeKeptAcrossRuns: what --metrics-textfile and --pushgateway
// hold after each run says how it ended, a failed run too: its exit code,
// its duration, its failed entries, and the last success, which a failed
// run keeps from the successful one before it (read back from the
// textfile; left out of its push, a POST, so that the Pushgateway keeps
// the group's). Neither holds the Go and process families, which
// node_exporter exports itself.
func TestOutcomeKeptAcrossRuns(t *testing.T) {
	gw, pushed := fakePushgateway(t)
	dir, src := oneFileTree(t)
	prom := filepath.Join(dir, "bulkmove.prom")
	series := func() map[string]float64 {
		t.Helper()
		b, err := os.ReadFile(prom)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_") {
				t.Errorf("textfile holds %q: node_exporter exports the Go and process families itself", line)
			}
			if name, v, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "bulkmove_job_") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("textfile line %q: %v", line, err)
				}
				m[name] = f
			}
		}
		return m
	}
	args := func(src string) []string {
		return []string{"--metrics-textfile", prom, "--pushgateway", gw.URL, src, filepath.Join(dir, "dst")}
	}

	before := float64(time.Now().Unix())
	var stderr bytes.Buffer
	if code := run(args(src), nil, io.Discard, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	ok := series()
	for name, want := range map[string]float64{"bulkmove_job_last_exit_code": 0, "bulkmove_job_running": 0, "bulkmove_job_files_failed": 0} {
		if got, found := ok[name]; !found || got != want {
			t.Errorf("after a success: %s = %v (present: %v), want %v", name, got, found, want)
		}
	}
	success := ok["bulkmove_job_last_success_timestamp_seconds"]
	if success < before || success > float64(time.Now().Unix())+1 {
		t.Errorf("after a success: last success %v, want the run's end (after %v)", success, before)
	}
	if d, found := ok["bulkmove_job_duration_seconds"]; !found || d <= 0 {
		t.Errorf("after a success: duration %v (present: %v)", d, found)
	}

	// A run that fails at once: SRC is not there.
	stderr.Reset()
	if code := run(args(filepath.Join(dir, "gone")), nil, io.Discard, &stderr); code != exitFatal {
		t.Fatalf("exit %d, want %d: %s", code, exitFatal, stderr.String())
	}
	failed := series()
	if got := failed["bulkmove_job_last_exit_code"]; got != exitFatal {
		t.Errorf("after a failure: last exit code %v, want %d", got, exitFatal)
	}
	if got := failed["bulkmove_job_last_success_timestamp_seconds"]; got != success {
		t.Errorf("after a failure: last success %v, want the successful run's, %v", got, success)
	}
	if failed["bulkmove_job_running"] != 0 {
		t.Error("after a failure: bulkmove_job_running is not 0")
	}

	pushes := pushed()
	if len(pushes) != 2 {
		t.Fatalf("%d pushes, want one a run", len(pushes))
	}
	for i, p := range pushes {
		if strings.Contains(p.body, "go_goroutines") || strings.Contains(p.body, "process_cpu_seconds_total") {
			t.Errorf("push %d holds the Go and process families", i)
		}
		if !strings.Contains(p.body, "bulkmove_job_last_exit_code") {
			t.Errorf("push %d lacks bulkmove_job_last_exit_code", i)
		}
	}
	if pushes[0].method != http.MethodPut || !strings.Contains(pushes[0].body, "bulkmove_job_last_success_timestamp_seconds") {
		t.Errorf("the success pushed by %s, with last success: %v; want PUT, true", pushes[0].method, strings.Contains(pushes[0].body, "bulkmove_job_last_success_timestamp_seconds"))
	}
	if pushes[1].method != http.MethodPost || strings.Contains(pushes[1].body, "bulkmove_job_last_success_timestamp_seconds") {
		t.Errorf("the failure pushed by %s, with last success: %v; want POST (the group's other families replaced), false", pushes[1].method, strings.Contains(pushes[1].body, "bulkmove_job_last_success_timestamp_seconds"))
	}
}

type push struct{ method, path, body string }

// fakePushgateway answers every push with 200 and returns what it was
// sent.
func fakePushgateway(t *testing.T) (*httptest.Server, func() []push) {
	var mu sync.Mutex
	var pushes []push
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		pushes = append(pushes, push{r.Method, r.URL.Path, string(b)})
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(gw.Close)
	return gw, func() []push {
		mu.Lock()
		defer mu.Unlock()
		return append([]push(nil), pushes...)
	}
}

// oneFileTree is a temporary directory with a source tree of one file.
func oneFileTree(t *testing.T) (dir, src string) {
	dir = t.TempDir()
	src = filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	return dir, src
}

// TestLocalTimeAccounted: a local copy accounts its streams' time as a
// remote one does: waiting for batches (idle), and under --bwlimit reading
// the source and waiting for the limit (blocked sending); the dashboard's
// time shares are not all "other".
func TestLocalTimeAccounted(t *testing.T) {
	dir, src := oneFileTree(t)
	if err := os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("x"), 768<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(dir, "bulkmove.prom")
	var stderr bytes.Buffer
	if code := run([]string{"-j", "2", "--bwlimit", "1M", "--metrics-textfile", prom, src, filepath.Join(dir, "dst")}, nil, io.Discard, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, _ := strings.Cut(line, "{")
		_, v, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(v, 64)
		sum[name] += f
	}
	for _, name := range []string{"bulkmove_stream_idle_seconds_total", "bulkmove_stream_read_seconds_total", "bulkmove_stream_send_blocked_seconds_total"} {
		if sum[name] <= 0 {
			t.Errorf("%s: %v over the streams of a local copy, want some time", name, sum[name])
		}
	}
	// 768 KiB at 1 MiB/s, less the bucket's first burst: most of the
	// time is the limit's.
	if sum["bulkmove_stream_send_blocked_seconds_total"] < 0.2 {
		t.Errorf("blocked sending (the limit) %.3fs, want most of the run", sum["bulkmove_stream_send_blocked_seconds_total"])
	}
}
