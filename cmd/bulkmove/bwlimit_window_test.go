package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestBwLimitWindows: at --bwlimit 20M, over 4 and over 8 streams to local
// agents (the wire path), the file data sent in every 10 s window, sampled
// from the metrics endpoint every 200 ms, is at most 105% of 20 MiB/s (the
// limit holds), and not far below it (the machine is shared and noisy: a
// generous lower bound only). The two runs go at once, 280 MiB each: about
// 15 s in all.
func TestBwLimitWindows(t *testing.T) {
	bin := testbin.Build(t)
	src := randomTree(t, shmDir(t), 1120, 256<<10)
	const limit = 20 << 20
	for _, streams := range []int{4, 8} {
		t.Run(fmt.Sprintf("%d streams", streams), func(t *testing.T) {
			t.Parallel()
			samples := sampleSent(t, bin, "--journal", "none", "--progress=none", "--via-agent", "-j", strconv.Itoa(streams),
				"--batch-size", "4MiB", "--bwlimit", "20M", "--metrics-addr", "127.0.0.1:0", src, filepath.Join(t.TempDir(), "dst"))
			last := samples[len(samples)-1].bytes
			lo, hi, n := 1e9, 0.0, 0
			for i, a := range samples {
				if a.bytes == 0 {
					continue // not sending yet
				}
				for _, b := range samples[i+1:] {
					if b.bytes == last {
						break // done sending: the window is over the end
					}
					// Each count was read some time between the scrape's
					// request and its answer (late on a loaded machine): the
					// window's rate is judged over its longest span against
					// the limit, over its shortest against the floor.
					if d := b.asked.Sub(a.answered); d >= 10*time.Second {
						sent := float64(b.bytes - a.bytes)
						lo = min(lo, sent/d.Seconds()/limit)
						hi = max(hi, sent/b.answered.Sub(a.asked).Seconds()/limit)
						n++
						break
					}
				}
			}
			t.Logf("%d streams: %d windows of 10 s, rate %.1f%% to %.1f%% of 20 MiB/s", streams, n, 100*lo, 100*hi)
			if n < 5 {
				t.Fatalf("%d windows of 10 s while sending (of %d samples): the transfer is too short to judge", n, len(samples))
			}
			if hi > 1.05 {
				t.Errorf("a 10 s window at %.1f%% of the limit: over 105%%", 100*hi)
			}
			if lo < 0.75 {
				t.Errorf("a 10 s window at %.1f%% of the limit: far below it", 100*lo)
			}
		})
	}
}

// sentSample is a count of the bytes sent, read between asked and
// answered.
type sentSample struct {
	asked, answered time.Time
	bytes           int64
}

// sampleSent runs bulkmove with args (which ask for --metrics-addr
// 127.0.0.1:0) and samples the file data its streams have sent, every
// 200 ms, until it exits.
func sampleSent(t *testing.T, bin string, args ...string) []sentSample {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	addr := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if a, ok := strings.CutPrefix(sc.Text(), "bulkmove: metrics on "); ok {
				addr <- a
			}
		}
		close(addr)
	})
	url, ok := <-addr
	if !ok {
		cmd.Wait()
		wg.Wait()
		t.Fatalf("no metrics address:\n%s", out.String())
	}
	done := make(chan error, 1)
	go func() { wg.Wait(); done <- cmd.Wait() }()
	hc := &http.Client{Timeout: time.Second}
	var samples []sentSample
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("bulkmove: %v\n%s", err, out.String())
			}
			if len(samples) == 0 {
				t.Fatal("no samples")
			}
			return samples
		case <-tick.C:
			asked := time.Now()
			resp, err := hc.Get(url)
			if err != nil {
				continue // exiting
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var sum int64
			for _, l := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(l, "bulkmove_stream_sent_bytes_total{") {
					f := strings.Fields(l)
					v, _ := strconv.ParseFloat(f[len(f)-1], 64)
					sum += int64(v)
				}
			}
			samples = append(samples, sentSample{asked, time.Now(), sum})
		}
	}
}
