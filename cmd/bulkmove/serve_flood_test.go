package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

// floodConns and floodBytes are a stranger's flood: 200 connections
// at once, each sending 1 MiB with no newline, before any token.
const (
	floodConns = 200
	floodBytes = 1 << 20
	floodRSS   = 64 << 20 // what the attacked process may grow by
)

// flood runs floodConns connections from 127.0.0.2 to addr until ctx
// ends, each sending floodBytes without a newline (over TLS if tlsOn), and
// again once the server drops it.
func flood(ctx context.Context, addr string, tlsOn bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	chunk := []byte(strings.Repeat("x", 64<<10))
	for range floodConns {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil && tlsOn {
					tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
					tc.SetDeadline(time.Now().Add(5 * time.Second))
					if err = tc.HandshakeContext(ctx); err != nil {
						c.Close()
					}
					c = tc
				}
				if err != nil {
					time.Sleep(50 * time.Millisecond) // dropped at once: again, a little later
					continue
				}
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				for sent := 0; sent < floodBytes && ctx.Err() == nil; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						break
					}
				}
				c.Close()
			}
		})
	}
	return &wg
}

// procKB reads a field of /proc/PID/status, in KiB.
func procKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestServeFlood: 200 TLS connections at once to `bulkmove serve`, each
// sending 1 MiB with no newline before any token, again and again: serve's
// peak RSS grows by at most 64 MiB, its log by 10 lines, and a sender
// with the token (from another address) pushes a tree during the flood
// and after it.
func TestServeFlood(t *testing.T) {
	dir := shmDir(t)
	p := startServeProc(t, dir, nil, "data="+filepath.Join(dir, "root"))
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	for i := range 20 {
		os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), []byte(strings.Repeat("data", 1000)), 0o644)
	}
	push := func(dest string) {
		t.Helper()
		if out, code := runBM(t, nil, "-j", "2", "--token-file", p.tok, "--fingerprint", p.fp, src, "bulkmove://"+p.addr+"/data/"+dest); code != 0 {
			t.Errorf("push to %s: exit %d:\n%s", dest, code, out)
		}
	}
	push("warm") // the receiver's own buffers, before the baseline
	pid := p.cmd.Process.Pid
	base := procKB(t, pid, "VmRSS")
	ctx, cancel := context.WithCancel(context.Background())
	wg := flood(ctx, p.addr, true)
	time.Sleep(2 * time.Second)
	push("during")
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	push("after")
	peak := procKB(t, pid, "VmHWM")
	t.Logf("serve RSS %d KiB before the flood, peak %d KiB", base, peak)
	if grew := (peak - base) << 10; grew > floodRSS {
		t.Errorf("serve grew by %d MiB under the flood, want at most %d MiB", grew>>20, floodRSS>>20)
	}
	// Nor does the flood fill the log: a minute's worth from one address.
	if n := strings.Count(p.log.String(), "serve: 127.0.0.2:"); n > 10 {
		t.Errorf("%d lines logged for the flood's failed handshakes, want at most 10 a minute", n)
	}
}

// TestServeFloodDataPlane: the same flood at the agent's data-plane port,
// TLS and TCP: the agent's peak RSS grows by at most 64 MiB, and the
// job's stream (from another address) is admitted during the flood.
func TestServeFloodDataPlane(t *testing.T) {
	for _, mode := range []dataplane.Mode{dataplane.TLS, dataplane.TCP} {
		t.Run(string(mode), func(t *testing.T) {
			dir := shmDir(t)
			agent := exec.Command(testbin.Build(t), "--agent", "--hub", "1", "--data", string(mode), "--data-addr", "127.0.0.1", "--", dir)
			stdin, _ := agent.StdinPipe()
			stdout, _ := agent.StdoutPipe()
			if err := agent.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { agent.Process.Kill(); agent.Wait() }()
			banner, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			var offer dataplane.Offer
			for _, f := range strings.Fields(banner) {
				if strings.HasPrefix(f, "data=") {
					offer, err = dataplane.ParseOffer(f)
				}
			}
			if err != nil || offer.Port == 0 {
				t.Fatalf("no data-plane offer in the agent's banner: %v", err)
			}
			pid := agent.Process.Pid
			base := procKB(t, pid, "VmRSS")
			ctx, cancel := context.WithCancel(context.Background())
			wg := flood(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(offer.Port)), mode == dataplane.TLS)
			time.Sleep(2 * time.Second)
			dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer dcancel()
			c, err := dataplane.Dial(dctx, "127.0.0.1", offer, 0)
			if err == nil {
				var conn *send.Client
				if conn, err = send.Dial(dctx, "stream 0", c, c, c, engine.Version, wire.ReceiveOptions{Check: wire.CheckQuick}, source.Source{Root: dir}); err == nil {
					err = conn.Prune(dctx, &wire.PruneRequest{}, func(*wire.PruneResult) {})
					conn.Abort()
				}
				c.Close()
			}
			if err != nil {
				t.Errorf("the job's stream during the flood: %v", err)
			}
			time.Sleep(time.Second)
			cancel()
			wg.Wait()
			peak := procKB(t, pid, "VmHWM")
			stdin.Close()
			t.Logf("agent RSS %d KiB before the flood, peak %d KiB", base, peak)
			if grew := (peak - base) << 10; grew > floodRSS {
				t.Errorf("the agent grew by %d MiB under the flood, want at most %d MiB", grew>>20, floodRSS>>20)
			}
		})
	}
}
