package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/testbin"
)

// controlJob is a running bulkmove job, slowed by --bwlimit 64K so that
// it outlives the test, and the address of its metrics listener.
type controlJob struct {
	url    string // http://host:port
	port   string
	stderr func() string
}

// startControlJob starts bulkmove with args before SRC DEST and waits for
// the metrics address it prints; the job is killed at the end of the test.
func startControlJob(t *testing.T, args ...string) *controlJob {
	t.Helper()
	dir := t.TempDir()
	src := randomTree(t, dir, 4, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, testbin.Build(t), append(append([]string{"--journal", "none", "--bwlimit", "64K", "--progress=none"}, args...), src, filepath.Join(dir, "dst"))...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if _, rest, ok := strings.Cut(sc.Text(), "metrics on http://"); ok {
				a, _, _ := strings.Cut(rest, "/metrics")
				select {
				case addr <- a:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	t.Cleanup(func() { cancel(); <-done })
	j := &controlJob{stderr: func() string { mu.Lock(); defer mu.Unlock(); return out.String() }}
	select {
	case a := <-addr:
		j.url = "http://" + a
		_, j.port, _ = net.SplitHostPort(a)
	case <-done:
		t.Fatalf("bulkmove %s exited before it listened:\n%s", strings.Join(args, " "), j.stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("bulkmove %s printed no metrics address in 30 s:\n%s", strings.Join(args, " "), j.stderr())
	}
	return j
}

// do sends method path with body and, unless auth is "", the header
// "Authorization: auth"; it returns the status, the body and how long the
// answer took.
func (j *controlJob) do(t *testing.T, method, path, body, auth string) (int, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, j.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), time.Since(start)
}

// limit is the job's bandwidth limit as a user sees it: GET /bwlimit, and
// the gauge in /metrics.
func (j *controlJob) limit(t *testing.T) (shown, gauge string) {
	t.Helper()
	_, shown, _ = j.do(t, "GET", "/bwlimit", "", "")
	_, m, _ := j.do(t, "GET", "/metrics", "", "")
	for l := range strings.SplitSeq(m, "\n") {
		if v, ok := strings.CutPrefix(l, "bulkmove_bwlimit_bytes_per_second "); ok {
			gauge = v
		}
	}
	return shown, gauge
}

// writeToken writes a fresh random token into a file of mode perm.
func writeToken(t *testing.T, perm os.FileMode) (path, token string) {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	token = hex.EncodeToString(b)
	path = filepath.Join(t.TempDir(), "control-token")
	if err := os.WriteFile(path, []byte(token+"\n"), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return path, token
}

// TestControlNoToken is a stranger on the control port of a job started
// without --control-token: PUT /bwlimit off (to lift the limit) and PUT
// 1G are refused with 403 and a message saying how to turn the control
// on, and the job's limit stays 64 KiB/s (GET /bwlimit and the gauge);
// /metrics stays readable.
func TestControlNoToken(t *testing.T) {
	j := startControlJob(t, "--metrics-addr", "127.0.0.1:0")
	for _, body := range []string{"off", "1G"} {
		code, msg, _ := j.do(t, "PUT", "/bwlimit", body, "")
		if code != http.StatusForbidden || !strings.Contains(msg, "--control-token") {
			t.Errorf("PUT /bwlimit %s without --control-token: %d %q, want 403 saying how to enable it", body, code, msg)
		}
	}
	if shown, gauge := j.limit(t); shown != "64KiB" || gauge != "65536" {
		t.Errorf("after the refused PUTs the limit is %q (gauge %q), want 64KiB (65536)\n%s", shown, gauge, j.stderr())
	}
	if strings.Contains(j.stderr(), "PUT /bwlimit from") {
		t.Errorf("the job reports a change by PUT:\n%s", j.stderr())
	}
}

// TestControlToken is the same stranger against a job started with
// --control-token: no token and a wrong one get 401, each after a delay,
// and leave the limit as it was; the right token sets it.
func TestControlToken(t *testing.T) {
	file, token := writeToken(t, 0o600)
	j := startControlJob(t, "--metrics-addr", "127.0.0.1:0", "--control-token", file)
	for _, auth := range []string{"", "Bearer " + strings.Repeat("0", len(token)), "Bearer " + token[:len(token)-1], "Basic " + token, "Bearer"} {
		code, msg, took := j.do(t, "PUT", "/bwlimit", "off", auth)
		if code != http.StatusUnauthorized {
			t.Errorf("PUT /bwlimit off with Authorization %q: %d %q, want 401", auth, code, msg)
		}
		if took < 900*time.Millisecond {
			t.Errorf("PUT /bwlimit with Authorization %q answered in %v: a wrong token is not slowed", auth, took)
		}
	}
	if shown, gauge := j.limit(t); shown != "64KiB" || gauge != "65536" {
		t.Errorf("after wrong tokens the limit is %q (gauge %q), want 64KiB (65536)\n%s", shown, gauge, j.stderr())
	}
	// A limit the job is still bound by: lifted far, it would end before
	// the limit is read back.
	if code, msg, _ := j.do(t, "PUT", "/bwlimit", "128K", "Bearer "+token); code != http.StatusOK || msg != "128KiB" {
		t.Errorf("PUT /bwlimit 128K with the token: %d %q, want 200 128KiB", code, msg)
	}
	if shown, gauge := j.limit(t); shown != "128KiB" || gauge != "131072" {
		t.Errorf("after the PUT with the token the limit is %q (gauge %q), want 128KiB", shown, gauge)
	}
	if strings.Contains(j.stderr(), token) {
		t.Errorf("the token is on stderr:\n%s", j.stderr())
	}
}

// TestControlTokenFile: a control token file others can read, or one that
// holds the placeholder of the shipped examples, is refused before the job
// starts, naming the file and the cause.
func TestControlTokenFile(t *testing.T) {
	open, _ := writeToken(t, 0o644)
	group, _ := writeToken(t, 0o640)
	placeholder := filepath.Join(t.TempDir(), "token")
	os.WriteFile(placeholder, []byte("CHANGE-ME-openssl-rand-hex-32\n"), 0o600)
	src := t.TempDir()
	for _, c := range []struct {
		file, want string
		code       int
	}{
		{open, "mode 0644", exitUsage},
		{placeholder, "placeholder", exitUsage},
		{group, "", exitOK}, // group-readable: a Kubernetes Secret volume with an fsGroup
	} {
		var stderr bytes.Buffer
		code := run([]string{"--journal", "none", "--metrics-addr", "127.0.0.1:0", "--control-token", c.file, src, filepath.Join(t.TempDir(), "dst")}, nil, io.Discard, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) || c.want != "" && !strings.Contains(stderr.String(), c.file) {
			t.Errorf("--control-token %s: exit %d, want %d and a message naming it and %q:\n%s", c.file, code, c.code, c.want, stderr.String())
		}
	}
}

// TestRemoteToRemoteControl: on a remote-to-remote move's control host
// (whose /bwlimit is box1's limit, TestR2RBwLimitRelayed), a
// --metrics-addr it cannot listen on ends the move before it logs in to
// either host, with or without --control-token, naming the flag and why.
func TestRemoteToRemoteControl(t *testing.T) {
	file, _ := writeToken(t, 0o600)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--metrics-addr", "203.0.113.1:0", "--control-token", file}, []string{"metrics listener", "203.0.113.1"}},
		{[]string{"--metrics-addr", "203.0.113.1:0"}, []string{"metrics listener", "203.0.113.1"}},
	} {
		var stderr bytes.Buffer
		code := run(append(c.args, "box1.invalid:/src", "box2.invalid:/dst"), nil, io.Discard, &stderr)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d:\n%s", c.args, code, exitUsage, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, stderr.String())
			}
		}
		if strings.Contains(stderr.String(), "lookup") {
			t.Errorf("%v: tried to log in first:\n%s", c.args, stderr.String())
		}
	}
}

// TestMetricsLoopbackDefault: --metrics-addr :0 (no host) listens on
// loopback only, says so, and a stranger on another address of this
// machine cannot connect; an explicit host binds as given.
func TestMetricsLoopbackDefault(t *testing.T) {
	ip := nonLoopbackIP(t)
	j := startControlJob(t, "--metrics-addr", ":0")
	if !strings.HasPrefix(j.url, "http://127.0.0.1:") || !strings.Contains(j.stderr(), "loopback only") {
		t.Errorf("--metrics-addr :0 listens on %s; want 127.0.0.1 and stderr saying loopback only:\n%s", j.url, j.stderr())
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, j.port), 2*time.Second); err == nil {
		c.Close()
		t.Errorf("--metrics-addr :0: port %s is reachable on %s, not only on loopback", j.port, ip)
	}
	all := startControlJob(t, "--metrics-addr", "0.0.0.0:0")
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, all.port), 2*time.Second)
	if err != nil {
		t.Errorf("--metrics-addr 0.0.0.0:0: not reachable on %s: %v", ip, err)
	} else {
		c.Close()
	}
	if strings.Contains(all.stderr(), "loopback only") {
		t.Errorf("--metrics-addr 0.0.0.0:0 says loopback only:\n%s", all.stderr())
	}
}

// nonLoopbackIP is an IPv4 address of this machine other than loopback.
func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("no IPv4 address other than loopback on this machine: nothing to reach the listener from")
	return ""
}
