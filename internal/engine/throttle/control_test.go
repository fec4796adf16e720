package throttle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/metrics"
)

// TestBwLimitControls: a Halve request (SIGUSR1's) halves the limit, a
// Double request (SIGUSR2's) doubles it, PUT /bwlimit on the metrics
// listener (with the control token) sets it and GET shows it; the gauge
// follows. From no limit Halve takes half the rate measured, Double
// leaves it off.
func TestBwLimitControls(t *testing.T) {
	var sched Schedule
	if err := sched.Set("4M"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	const moving = 8 << 20 // what the fake job moves a second
	asks := make(chan Request)
	c := New(sched, func() int64 { return int64(time.Since(began).Seconds() * moving) }, asks)
	var mu sync.Mutex
	var log bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx, func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&log, format+"\n", args...)
	})
	defer c.Stop()
	m := metrics.NewJob(1)
	m.Limit = c.Bucket()
	const token = "0123456789abcdef-control"
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", m.Registry("test"), metrics.Route{Pattern: "/bwlimit", Handler: metrics.GuardWrites(c, token, "read-only")})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String()
	hc := &http.Client{Timeout: 5 * time.Second}
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	ask := func(op Op) Request {
		r := Request{Op: op, Why: map[Op]string{Halve: "SIGUSR1", Double: "SIGUSR2"}[op]}
		asks <- r
		return r
	}
	askFor := func(op Op, want int64) { // Set: asked already
		t.Helper()
		why := "the control host's Set"
		if op != Set {
			why = ask(op).Why
		}
		for deadline := time.Now().Add(2 * time.Second); c.b.Rate() != want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if got := c.b.Rate(); got != want {
			t.Fatalf("after %s: rate %d, want %d", why, got, want)
		}
	}
	gauge := func(want string) {
		t.Helper()
		if _, body := do("GET", "/metrics", ""); !strings.Contains(body, "\nbulkmove_bwlimit_bytes_per_second "+want+"\n") {
			t.Errorf("metrics lack bulkmove_bwlimit_bytes_per_second %s", want)
		}
	}

	if code, body := do("GET", "/bwlimit", ""); code != 200 || body != "4MiB" {
		t.Errorf("GET /bwlimit: %d %q, want 200 4MiB", code, body)
	}
	gauge("4.194304e+06")
	askFor(Halve, 2<<20)
	askFor(Halve, 1<<20)
	askFor(Double, 2<<20)
	if code, body := do("PUT", "/bwlimit", "50M\n"); code != 200 || body != "50MiB" || c.b.Rate() != 50<<20 {
		t.Errorf("PUT /bwlimit 50M: %d %q, rate %d", code, body, c.b.Rate())
	}
	gauge("5.24288e+07")
	if code, body := do("PUT", "/bwlimit", "fast"); code != 400 || !strings.Contains(body, `"fast"`) || c.b.Rate() != 50<<20 {
		t.Errorf("PUT /bwlimit fast: %d %q, rate %d; want 400 naming it, the rate unchanged", code, body, c.b.Rate())
	}
	if code, _ := do("POST", "/bwlimit", "1M"); code != 405 {
		t.Errorf("POST /bwlimit: %d, want 405", code)
	}
	if code, body := do("PUT", "/bwlimit", "off"); code != 200 || body != "off" || c.b.Rate() != 0 {
		t.Errorf("PUT /bwlimit off: %d %q, rate %d", code, body, c.b.Rate())
	}
	gauge("0")
	asks <- Request{Op: Set, Rate: 3 << 20, Why: "PUT /bwlimit on the control host"} // box1 of a remote-to-remote move
	askFor(Set, 3<<20)
	asks <- Request{Op: Set, Rate: 0, Why: "PUT /bwlimit on the control host"}
	askFor(Set, 0)
	// No limit: SIGUSR2 leaves it so, SIGUSR1 takes half the measured rate.
	ask(Double)
	time.Sleep(600 * time.Millisecond) // and more than half a second measured
	if r := c.b.Rate(); r != 0 {
		t.Errorf("SIGUSR2 from no limit set %d", r)
	}
	ask(Halve)
	for deadline := time.Now().Add(2 * time.Second); c.b.Rate() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if r := c.b.Rate(); r < moving/2*95/100 || r > moving/2*105/100 {
		t.Errorf("SIGUSR1 from no limit, moving %d B/s: rate %d, want half within 5%%", moving, r)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{
		"bandwidth limit 2.0 MiB/s (SIGUSR1)\nbandwidth limit 1.0 MiB/s (SIGUSR1)\nbandwidth limit 2.0 MiB/s (SIGUSR2)\n",
		"bandwidth limit 50 MiB/s (PUT /bwlimit from 127.0.0.1:",
		"bandwidth limit off (PUT /bwlimit from",
		"bandwidth limit 3.0 MiB/s (PUT /bwlimit on the control host)\nbandwidth limit off (PUT /bwlimit on the control host)\n",
		"SIGUSR2: no bandwidth limit to double",
		"(SIGUSR1: half the 8.0 MiB/s moved over the last 10 s)",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestBwLimitFlags: the rates the flags take read back as they are written.
func TestBwLimitFlags(t *testing.T) {
	for _, r := range []int64{1, 1000, 1 << 10, 3 << 19, 50 << 20, 1 << 30, 12800 << 10, 3 << 40} {
		if got, err := units.ParseRate(rateText(r)); err != nil || got != r {
			t.Errorf("rateText(%d) = %q, read back as %d, %v", r, rateText(r), got, err)
		}
	}
}

// TestBwLimitRelay: /bwlimit of a limit another process applies (a
// remote-to-remote move's control host relaying to box1): GET shows the
// limit that process reported, PUT with the token asks it for a new one
// and shows it, a PUT it cannot pass on yet is answered 503 with why, a
// bad rate 400, one without the token 401, and nothing is asked then.
func TestBwLimitRelay(t *testing.T) {
	var mu sync.Mutex // the handler runs on the server's goroutines
	var asked []int64
	ready := false
	relay := Relay{Rate: func() int64 { return 1 << 20 }, Ask: func(rate int64, who string) error {
		mu.Lock()
		defer mu.Unlock()
		if !ready {
			return fmt.Errorf("no path yet")
		}
		asked = append(asked, rate)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const token = "0123456789abcdef-relay"
	addr, err := metrics.Serve(ctx, "127.0.0.1:0", metrics.NewJob(1).Registry("test"), metrics.Route{Pattern: "/bwlimit", Handler: metrics.GuardWrites(relay, token, "read-only")})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, body, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr.String()+"/bwlimit", strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := do("GET", "", ""); code != 200 || body != "1MiB" {
		t.Errorf("GET: %d %q, want 200 1MiB (the limit reported)", code, body)
	}
	if code, body := do("PUT", "off", token); code != 503 || !strings.Contains(body, "no path yet") {
		t.Errorf("PUT before the other process takes limits: %d %q, want 503 saying why", code, body)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	if code, _ := do("PUT", "off", ""); code != 401 {
		t.Errorf("PUT without the token: %d, want 401", code)
	}
	if code, _ := do("PUT", "fast", token); code != 400 {
		t.Errorf("PUT fast: %d, want 400", code)
	}
	if code, body := do("PUT", "5M", token); code != 200 || body != "5MiB" {
		t.Errorf("PUT 5M: %d %q, want 200 5MiB", code, body)
	}
	if code, body := do("PUT", "off", token); code != 200 || body != "off" {
		t.Errorf("PUT off: %d %q, want 200 off", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(asked) != fmt.Sprint([]int64{5 << 20, 0}) {
		t.Errorf("asked %v of the other process, want [5 MiB/s, off] and nothing for the refused PUTs", asked)
	}
}
