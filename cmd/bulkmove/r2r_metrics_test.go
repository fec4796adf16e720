package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/netnstest"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// httpIn is a client whose connections start in the network namespace ns.
func httpIn(ns string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		var d net.Dialer
		if nerr := netnstest.Do("/run/netns/"+ns, func() { c, err = d.DialContext(ctx, network, addr) }); nerr != nil {
			return nil, nerr
		}
		return c, err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// promValues is each series of family in a Prometheus text exposition,
// by its labels ("" for none).
func promValues(t *testing.T, text []byte, family string) map[string]float64 {
	t.Helper()
	vals := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(family)+`(\{[^}]*\})? (\S+)$`).FindAllSubmatch(text, -1) {
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			t.Fatalf("%s%s: %q", family, m[1], m[2])
		}
		vals[string(m[1])] = v
	}
	return vals
}

func promSum(vals map[string]float64) (n float64) {
	for _, v := range vals {
		n += v
	}
	return n
}

// TestR2RMetricsLive: the control host of a remote-to-remote move paced
// by --bwlimit serves --metrics-addr while the move runs, with the series
// a push serves: each stream's bytes, which grow as box1 reports them and
// at the end add up to the tree, box1's per-stream timings and its
// bandwidth limit. --metrics-textfile is written before the move ends.
// A batch a file: a stream's bytes count as its batches are acknowledged.
// box1's sender is held after it ends (a wrapper, --remote-bulkmove), so
// that the control host's last figures are read while it still serves.
func TestR2RMetricsLive(t *testing.T) {
	t.Parallel()
	h := newR2RHosts(t)
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(src, 0o755)
	const files, size = 32, 128 << 10
	rnd := rand.NewChaCha8([32]byte{30}) // what compression cannot shrink: the limit paces the move
	for i := range files {
		b := make([]byte, size)
		rnd.Read(b)
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), b, 0o644)
	}
	held, release := filepath.Join(dir, "held"), filepath.Join(dir, "release")
	wrapper := filepath.Join(dir, "bulkmove")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1" = --r2r-send ]; then
	%[1]s "$@"; rc=$?
	: > %[2]s
	i=0; while [ ! -f %[3]s ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
	exit $rc
fi
exec %[1]s "$@"
`, h.bin, held, release)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(release, nil, 0o644) // a failed test lets box1 go
	prom := filepath.Join(dir, "bulkmove.prom")

	cmd := exec.Command("ip", "netns", "exec", h.ctl, h.bin, "--ssh-config", h.config, "--remote-bulkmove", wrapper,
		"-j", "2", "--bwlimit", "1M", "--batch-files", "1", "--metrics-addr", "127.0.0.1:0", "--metrics-textfile", prom, "--metrics-textfile-interval", "200ms",
		"box1:"+src, "box2:"+dst)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // after a failed test; gone by then otherwise
	var errOut strings.Builder
	addr := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errOut.WriteString(sc.Text() + "\n")
			if a, ok := strings.CutPrefix(sc.Text(), "bulkmove: metrics on "); ok {
				a, _, _ = strings.Cut(a, " ")
				addr <- a
			}
		}
		close(addr)
	})
	exited := make(chan error, 1)
	go func() { wg.Wait(); exited <- cmd.Wait() }()
	wait := func() string {
		os.WriteFile(release, nil, 0o644)
		err := <-exited
		if code := exitOf(t, err); code != 0 {
			t.Fatalf("exit %d:\n%s", code, errOut.String())
		}
		t.Logf("bulkmove:\n%s", errOut.String())
		return errOut.String()
	}
	var url string
	for url == "" {
		select {
		case a, ok := <-addr:
			if !ok {
				wait()
				t.Fatal("the control host names no metrics address")
			}
			url = a
		case <-time.After(100 * time.Millisecond):
			if _, err := os.Stat(held); err == nil {
				wait()
				t.Fatal("box1's job ended, and the control host named no metrics address")
			}
		}
	}
	hc := httpIn(h.ctl)
	scrape := func() ([]byte, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	const total = files * size
	var during []float64 // the streams' bytes in each scrape while box1 moves
	last := map[string]float64{}
	for {
		if _, err := os.Stat(held); err == nil {
			break
		}
		b, err := scrape()
		if err != nil {
			select {
			case err := <-exited:
				t.Fatalf("the move ended before box1 was held (%v):\n%s", err, errOut.String())
			default:
			}
			t.Fatalf("a scrape while the move runs: %v", err)
		}
		sent := promValues(t, b, "bulkmove_stream_sent_bytes_total")
		for s, v := range sent {
			if v < last[s] {
				t.Errorf("stream %s's bytes went from %v down to %v", s, last[s], v)
			}
			last[s] = v
		}
		during = append(during, promSum(sent))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the streams' bytes in each scrape while box1 moved: %v", during)
	grew := false
	for _, n := range during {
		grew = grew || n > 0 && n < total
	}
	if !grew {
		t.Errorf("no scrape while the move ran saw part of the tree sent: %v", during)
	}

	// box1's sender has ended, and is held: its last progress is on its
	// way to the control host, which serves it until box1 is let go.
	var b []byte
	var sent map[string]float64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if b, err = scrape(); err != nil {
			t.Fatalf("a scrape once box1's job ended: %v", err)
		}
		sent = promValues(t, b, "bulkmove_stream_sent_bytes_total")
		if promSum(sent) == total && promSum(promValues(t, b, "bulkmove_job_done_bytes_total")) == total || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("the control host's /metrics once box1's job ended:\n%s", regexp.MustCompile(`(?m)^bulkmove_.*\n`).FindAll(b, -1))
	if len(sent) != 2 || promSum(sent) != total {
		t.Errorf("bulkmove_stream_sent_bytes_total: %v, want 2 streams adding up to %d", sent, total)
	}
	for _, c := range []struct {
		family string
		want   float64
	}{{"bulkmove_job_done_bytes_total", total}, {"bulkmove_job_done_files_total", files}, {"bulkmove_job_planned_bytes", total},
		{"bulkmove_stream_sent_files_total", files}, {"bulkmove_bwlimit_bytes_per_second", 1 << 20}} {
		if got := promValues(t, b, c.family); len(got) == 0 || promSum(got) != c.want {
			t.Errorf("%s: %v, want %v in all", c.family, got, c.want)
		}
	}
	var busy float64 // box1's streams' timings
	for _, f := range []string{"bulkmove_stream_read_seconds_total", "bulkmove_stream_send_blocked_seconds_total", "bulkmove_stream_ack_wait_seconds_total", "bulkmove_stream_idle_seconds_total"} {
		busy += promSum(promValues(t, b, f))
	}
	if busy <= 0 {
		t.Errorf("the streams' timings (reading, blocked, waiting, idle) are all 0")
	}
	if v := promValues(t, b, "bulkmove_bottleneck"); len(v) == 0 || promSum(v) != 1 {
		t.Errorf("bulkmove_bottleneck: %v, want one resource at 1", v)
	}
	tf, err := os.ReadFile(prom)
	if err != nil {
		t.Fatalf("--metrics-textfile before the move ended: %v", err)
	}
	if n := promSum(promValues(t, tf, "bulkmove_stream_sent_bytes_total")); n <= 0 {
		t.Errorf("--metrics-textfile before the move ended: the streams' bytes %v, want some:\n%s", n, tf)
	}
	if v := promValues(t, tf, "bulkmove_job_running"); promSum(v) != 1 || len(promValues(t, tf, "bulkmove_job_last_exit_code")) != 0 {
		t.Errorf("--metrics-textfile before the move ended: not the running job's:\n%s", tf)
	}

	wait()
	treecmp.Equal(t, src, dst, treecmp.Options{})
	tf, _ = os.ReadFile(prom)
	if v := promValues(t, tf, "bulkmove_job_last_exit_code"); len(v) != 1 || promSum(v) != 0 {
		t.Errorf("--metrics-textfile at the end: bulkmove_job_last_exit_code %v, want 0:\n%s", v, tf)
	}
}
