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
	"syscall"
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

// pacedTree makes src: files files f00, f01... of size random bytes
// (from seed), which compression cannot shrink, so that a bandwidth
// limit paces their move.
func pacedTree(t *testing.T, src string, files, size int, seed byte) {
	t.Helper()
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	rnd := rand.NewChaCha8([32]byte{seed})
	for i := range files {
		b := make([]byte, size)
		rnd.Read(b)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// metricsRun starts cmd, a bulkmove that serves --metrics-addr, and
// follows its stderr: the address it names comes on addr (closed at the
// end of its stderr), said is its stderr so far, and exited its exit once
// its stderr has ended. A failed test kills it.
func metricsRun(t *testing.T, cmd *exec.Cmd) (addr <-chan string, said func() string, exited <-chan error) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // after a failed test; gone by then otherwise
	var mu sync.Mutex
	var out strings.Builder
	named := make(chan string, 1)
	ended := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if a, ok := strings.CutPrefix(sc.Text(), "bulkmove: metrics on "); ok {
				a, _, _ = strings.Cut(a, " ")
				named <- a
			}
		}
		close(named)
		ended <- cmd.Wait()
	}()
	return named, func() string { mu.Lock(); defer mu.Unlock(); return out.String() }, ended
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
	const files, size = 32, 128 << 10
	pacedTree(t, src, files, size, 30)
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
	addr, said, exited := metricsRun(t, cmd)
	wait := func() string {
		os.WriteFile(release, nil, 0o644)
		err := <-exited
		if code := exitOf(t, err); code != 0 {
			t.Fatalf("exit %d:\n%s", code, said())
		}
		t.Logf("bulkmove:\n%s", said())
		return said()
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
				t.Fatalf("the move ended before box1 was held (%v):\n%s", err, said())
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
	var err error
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

// TestR2RBwLimitRelayed: the control host's /bwlimit and its SIGUSR1 and
// SIGUSR2 steer box1's limit. A remote-to-remote move paced by --bwlimit
// 64K would take a minute; a PUT /bwlimit without the token is refused
// (401); one with it (answered 503 until box1's streams have a path) sets
// box1's limit, SIGUSR2 on the control host doubles it, a PUT of off lifts
// it, box1 says each, and the move ends whole in a few seconds.
func TestR2RBwLimitRelayed(t *testing.T) {
	t.Parallel()
	h := newR2RHosts(t)
	dir := shmDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	pacedTree(t, src, 32, 128<<10, 31)
	tokenFile, token := writeToken(t, 0o600)
	cmd := exec.Command("ip", "netns", "exec", h.ctl, h.bin, "--ssh-config", h.config, "-j", "2", "--bwlimit", "64K",
		"--metrics-addr", "127.0.0.1:0", "--control-token", tokenFile, "box1:"+src, "box2:"+dst)
	start := time.Now()
	addr, said, exited := metricsRun(t, cmd)
	a, ok := <-addr
	if !ok {
		t.Fatalf("the control host names no metrics address:\n%s", said())
	}
	url := strings.TrimSuffix(a, "/metrics") + "/bwlimit"
	hc := httpIn(h.ctl)
	put := func(body, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("PUT %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, msg := put("off", ""); code != http.StatusUnauthorized || !strings.Contains(msg, "token") {
		t.Errorf("PUT /bwlimit off without the token: %d %q, want 401 asking for the token", code, msg)
	}
	for {
		code, msg := put("32K", token)
		if code == http.StatusOK {
			if msg != "32KiB" {
				t.Errorf("PUT /bwlimit 32K answered %q", msg)
			}
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("PUT /bwlimit 32K with the token: %d %q", code, msg)
		}
		select {
		case err := <-exited:
			t.Fatalf("the move ended (%v) before its limit could be set:\n%s", err, said())
		case <-time.After(50 * time.Millisecond):
		}
	}
	doubled := regexp.MustCompile(`bandwidth limit 64 KiB/s \(SIGUSR2 on the control host\)`)
	for deadline := time.Now().Add(20 * time.Second); !doubled.MatchString(said()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("box1 did not double its limit of 32K on SIGUSR2 at the control host:\n%s", said())
		}
		if strings.Contains(said(), "bandwidth limit 32 KiB/s (PUT /bwlimit on the control host)") {
			cmd.Process.Signal(syscall.SIGUSR2)
			time.Sleep(time.Second) // one doubling, not one a poll
		}
	}
	if code, msg := put("off", token); code != http.StatusOK || msg != "off" {
		t.Fatalf("PUT /bwlimit off: %d %q", code, msg)
	}
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(40 * time.Second):
		t.Fatalf("the move still runs 40 s after its limit was lifted (at 64K it takes 64 s):\n%s", said())
	}
	took := time.Since(start)
	if code := exitOf(t, werr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, said())
	}
	t.Logf("took %v:\n%s", took, said())
	if !regexp.MustCompile(`(?s)bandwidth limit 32 KiB/s \(PUT /bwlimit on the control host\).*bandwidth limit 64 KiB/s \(SIGUSR2 on the control host\).*bandwidth limit off \(PUT /bwlimit on the control host\)`).MatchString(said()) {
		t.Errorf("box1 did not say, in order, its limit set, doubled and lifted from the control host:\n%s", said())
	}
	if took > 30*time.Second {
		t.Errorf("the move took %v once its limit was lifted (at 64K it takes 64 s)", took)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{})
}
