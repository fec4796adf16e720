package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestTextfileAndPush: --metrics-textfile leaves the final metrics in the
// file (and no temporary beside it), --pushgateway pushes them under the
// job name with an instance label.
func TestTextfileAndPush(t *testing.T) {
	var mu sync.Mutex
	var pushed, path, method string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		pushed, path, method = string(b), r.URL.Path, r.Method
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer gw.Close()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
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
	mu.Lock()
	defer mu.Unlock()
	if method != http.MethodPut || !strings.HasPrefix(path, "/metrics/job/nightly/instance/") {
		t.Errorf("pushed with %s to %q, want PUT to /metrics/job/nightly/instance/HOST", method, path)
	}
	if pushed == "" {
		t.Error("nothing pushed")
	}
}
