package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestListenAddr: an address without a host is loopback's; any host is
// kept as given.
func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		in, want string
		loopback bool
	}{
		{":9100", "127.0.0.1:9100", true},
		{":0", "127.0.0.1:0", true},
		{"0.0.0.0:9100", "0.0.0.0:9100", false},
		{"[::]:9100", "[::]:9100", false},
		{"mover01.example.org:9100", "mover01.example.org:9100", false},
		{"9100", "9100", false}, // not an address: net.Listen says so
	} {
		if got, lo := ListenAddr(c.in); got != c.want || lo != c.loopback {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q, %v", c.in, got, lo, c.want, c.loopback)
		}
	}
}

// TestGuardWrites: reads pass; writes are refused without a token (403,
// the message given) and with a wrong one (401); wrong guesses sent at
// once are answered one delay apart; the right token passes at once,
// while guesses wait.
func TestGuardWrites(t *testing.T) {
	defer func(d time.Duration) { wrongTokenDelay = d }(wrongTokenDelay)
	wrongTokenDelay = 300 * time.Millisecond
	var writes atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			writes.Add(1)
		}
	})
	do := func(g http.Handler, method, auth string) int {
		r := httptest.NewRequest(method, "/bwlimit", strings.NewReader("1M"))
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Code
	}
	off := GuardWrites(h, "", "turn it on with --control-token")
	if c := do(off, "GET", ""); c != 200 {
		t.Errorf("GET without a token: %d", c)
	}
	if c := do(off, "PUT", "Bearer x"); c != 403 || writes.Load() != 0 {
		t.Errorf("PUT with the control off: %d, %d writes", c, writes.Load())
	}
	const tok = "0123456789abcdef0123"
	on := GuardWrites(h, tok, "")
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if c := do(on, "PUT", "Bearer wrong"); c != 401 {
				t.Errorf("PUT with a wrong token: %d", c)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // the guesses are waiting
	right := time.Now()
	if c := do(on, "PUT", "bearer "+tok); c != 200 || time.Since(right) >= wrongTokenDelay {
		t.Errorf("PUT with the token while guesses wait: %d after %v", c, time.Since(right))
	}
	wg.Wait()
	if el := time.Since(start); el < 4*wrongTokenDelay {
		t.Errorf("4 wrong guesses at once answered in %v, want at least %v (one a delay)", el, 4*wrongTokenDelay)
	}
	if writes.Load() != 1 {
		t.Errorf("%d writes, want the one with the token", writes.Load())
	}
}
