package deploy_test

// The control endpoint (PUT /bwlimit) of each shipped way to start a
// sender with metrics: the command line in prometheus/scrape.yml and the
// Slurm script. Each is run for real, limited to 64 KiB/s so that it
// still runs while its endpoint is tried: no token and a wrong one are
// refused (401), the right one lifts the limit (200), and the job ends.

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// controlSource is a tree that takes minutes at 64 KiB/s.
func controlSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	big := bytes.Repeat([]byte("bulkmove control endpoint "), 8<<20/26)
	if err := os.WriteFile(filepath.Join(src, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "small"), []byte("x"), 0o644)
	return src
}

// controlTokenFile writes a token file as the shipped files ask for: 0600.
func controlTokenFile(t *testing.T) (file, token string) {
	t.Helper()
	token = "3b8e1f9a0c6d24e7b5a9f1c3d8e0a2b64f7c9e1d3a5b8c0e"
	file = filepath.Join(t.TempDir(), "control-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, token
}

// tryControl waits for the job's metrics listener at addr, then tries
// PUT /bwlimit without a token, with a wrong one and with the right one
// (which lifts the limit), and waits for the job to succeed.
func tryControl(t *testing.T, cmd *exec.Cmd, out *syncBuffer, addr, token string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "metrics on http://"); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the job exited (%v) before listening for metrics:\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not listen for metrics in 30 s:\n%s", out)
		}
	}
	for _, c := range []struct {
		what, token, body string
		want              int
	}{{"no token", "", "off", http.StatusUnauthorized}, {"a wrong token", wrongToken, "off", http.StatusUnauthorized}, {"the control token", token, "off", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/bwlimit", strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("PUT /bwlimit with %s: %v\n%s", c.what, err, out)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("PUT /bwlimit with %s: %d, want %d", c.what, resp.StatusCode, c.want)
		}
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("the job: %v\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the job still runs 60 s after its limit was lifted:\n%s", out)
	}
}

// TestControlScrapeConfig runs the command line prometheus/scrape.yml
// shows, its host and paths here, with a 64 KiB/s limit.
func TestControlScrapeConfig(t *testing.T) {
	b, err := os.ReadFile(scrapeFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#\s+bulkmove (.*--metrics-addr.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s shows no bulkmove command line with --metrics-addr", scrapeFile)
	}
	args := strings.Fields(string(m[1]))
	bin := testbin.Build(t)
	src, dst := controlSource(t), filepath.Join(t.TempDir(), "dst")
	tokFile, token := controlTokenFile(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	var metricsHost string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--metrics-addr" && i+1 < len(args):
			metricsHost = args[i+1]
			args[i+1] = addr
			i++
		case args[i] == "--control-token" && i+1 < len(args):
			args[i+1] = tokFile
			i++
		}
	}
	if metricsHost == "" || !slices.Contains(args, "--control-token") {
		t.Fatalf("%s: the command line %q lacks --metrics-addr or --control-token", scrapeFile, m[1])
	}
	if strings.HasPrefix(metricsHost, ":") {
		t.Errorf("%s: --metrics-addr %s listens on loopback, out of the scraper's reach", scrapeFile, metricsHost)
	}
	// SRC and DEST, the last two: here a local copy.
	args = append(args[:len(args)-2], "--bwlimit", "64K", "--progress=none", src, dst)
	cmd := exec.Command(bin, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tryControl(t, cmd, out, addr, token)
	treecmp.Equal(t, src, dst)
}

// TestControlSlurm runs the Slurm script as a task would (srun a
// stand-in that runs its command), with METRICS_PORT and CONTROL_TOKEN.
func TestControlSlurm(t *testing.T) {
	needTools(t, false, "bash")
	bin := testbin.Build(t)
	stand := t.TempDir()
	os.WriteFile(filepath.Join(stand, "srun"), []byte("#!/bin/sh\n# srun --ntasks=1 CMD...\nshift\nexec \"$@\"\n"), 0o755)
	src, dst := controlSource(t), filepath.Join(t.TempDir(), "dst")
	tokFile, token := controlTokenFile(t)
	port := freePort(t)
	script, _ := filepath.Abs(sbatchFile)
	cmd := exec.Command("bash", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+stand+":"+os.Getenv("PATH"), "BULKMOVE="+bin,
		"SLURM_ARRAY_TASK_ID=0", "SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX=0", "SLURM_ARRAY_JOB_ID=77", "SLURM_JOB_ID=78",
		"SRC="+src, "DEST="+dst, "METRICS_HOST=127.0.0.1", fmt.Sprintf("METRICS_PORT=%d", port), "CONTROL_TOKEN="+tokFile,
		"EXTRA=--bwlimit 64K")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tryControl(t, cmd, out, fmt.Sprintf("127.0.0.1:%d", port), token)
	treecmp.Equal(t, src, dst)
}
