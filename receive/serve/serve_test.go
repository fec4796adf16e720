package serve

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

const testToken = "s3cret-token-0123456789"

// inProcServe runs a server of one root "data" in this process, with
// limits l and tune applied, until the test ends; it returns the server,
// its address, the sender's TLS settings for it, and its log.
func inProcServe(t *testing.T, l Limits, tune func(*Server)) (*Server, string, *tls.Config, *lockedBuf) {
	t.Helper()
	root, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	cfg, fp, err := dataplane.ServerConfig("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuf{}
	s := New(Config{Roots: map[string]*os.File{"data": root}, Token: testToken, TLS: cfg, Limits: l, Version: "test",
		Logf: func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }})
	if tune != nil {
		tune(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })
	ccfg, _ := dataplane.ClientConfig("127.0.0.1", "", fp, "", "")
	return s, ln.Addr().String(), ccfg, log
}

// jobsGone waits up to within for the server to have no job open.
func jobsGone(s *Server, within time.Duration) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n := len(s.jobs)
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// dialFrom opens a stream to serve at addr from the local address from
// (another peer than 127.0.0.1), greets with g and says its Hello: the
// stream is up when the server answered it.
func dialFrom(ctx context.Context, from, addr string, cfg *tls.Config, g dataplane.Greeting) (*send.Client, net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	c := tls.Client(raw, cfg)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("TLS: %w", err)
	}
	if err := dataplane.WriteGreeting(c, g); err != nil {
		c.Close()
		return nil, nil, err
	}
	conn, err := send.Dial(ctx, from, c, c, c, "test", wire.ReceiveOptions{Check: wire.CheckQuick}, source.Source{Root: os.TempDir()})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	c.SetDeadline(time.Time{})
	return conn, c, nil
}

// TestServeWrongTokens: wrong tokens from one peer are refused, each
// later than the one before (the configured delay, doubling); past the
// limit the peer is locked out (its connections closed at once, even with
// the right token), while another peer with the right token is served all
// along. The log names the lockout and holds no part of either token.
func TestServeWrongTokens(t *testing.T) {
	_, addr, cfg, log := inProcServe(t, DefaultLimits, func(s *Server) {
		s.gate.FailDelay, s.gate.MaxFailDelay = 150*time.Millisecond, 600*time.Millisecond
		s.gate.LockoutAfter, s.gate.Lockout = 4, time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const wrong = "wrong-token-9876543210"
	for i, want := range []time.Duration{150, 300, 600, 600} {
		start := time.Now()
		_, _, err := dialFrom(ctx, "127.0.0.2", addr, cfg, dataplane.Greeting{Token: wrong, Job: fmt.Sprint("w", i), Dest: "data/x"})
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "wrong token") || took < want*time.Millisecond {
			t.Errorf("wrong token %d: %v after %s, want refused after at least %s", i+1, err, took.Round(time.Millisecond), want*time.Millisecond)
		}
		// Meanwhile another peer, with the token, gets in.
		good, c, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: fmt.Sprint("g", i), Dest: "data/g"})
		if err != nil {
			t.Fatalf("the right token from another peer, after %d wrong ones: %v", i+1, err)
		}
		good.Abort()
		c.Close()
	}
	// Closed at once: before the TLS handshake (nothing read, no wrong
	// token's delay after it), and in far less than a second on a quiet
	// machine (5 s here: a loaded one stretches the dial itself).
	start := time.Now()
	if _, _, err := dialFrom(ctx, "127.0.0.2", addr, cfg, dataplane.Greeting{Token: testToken, Job: "late", Dest: "data/x"}); err == nil || !strings.HasPrefix(err.Error(), "TLS: ") || time.Since(start) > 5*time.Second {
		t.Errorf("a locked-out peer, with the right token: %v after %s, want closed at once, before TLS", err, time.Since(start).Round(time.Millisecond))
	}
	if !strings.Contains(log.String(), "127.0.0.2: 4 wrong tokens: locked out") {
		t.Errorf("the log does not name the lockout:\n%s", log)
	}
	assertNoToken(t, log.String(), testToken, wrong)
}

// assertNoToken fails if text holds any 8 characters in a row of a token.
func assertNoToken(t *testing.T, text string, tokens ...string) {
	t.Helper()
	for _, tok := range tokens {
		for i := 0; i+8 <= len(tok); i++ {
			if strings.Contains(text, tok[i:i+8]) {
				t.Errorf("the log holds %q, part of the token %q:\n%s", tok[i:i+8], tok, text)
				break
			}
		}
	}
}

// TestServeStallTimeout: after its Hello, a stream that stops with work
// in flight (a manifest answered and its data not sent; half a frame) is
// closed once --stall-timeout passes, and its job's destination let go;
// one that waits between batches, longer than the timeout, is not (a
// stream with nothing to do until its job's last file lands), nor one that
// keeps talking.
func TestServeStallTimeout(t *testing.T) {
	l := DefaultLimits
	l.Stall = 400 * time.Millisecond
	s, addr, cfg, _ := inProcServe(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var manifest, half bytes.Buffer
	wire.WriteFrame(&manifest, wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 1,
		Entries: []model.Entry{{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: 5, MTime: 1, Nlink: 1}}}))
	wire.WriteFrame(&half, wire.Manifest, wire.EncodeManifest(&wire.BatchManifest{ID: 1}))
	for _, tc := range []struct {
		name  string
		stall []byte
	}{{"manifest answered, no data", manifest.Bytes()}, {"half a frame", half.Bytes()[:half.Len()/2]}} {
		conn, c, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: "stall", Dest: "data/x"})
		if err != nil {
			t.Fatal(err)
		}
		c.Write(tc.stall)
		start := time.Now()
		if !jobsGone(s, 5*time.Second) {
			t.Fatalf("%s: the stream is still served after %s", tc.name, time.Since(start).Round(time.Millisecond))
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("%s: cut after %s, before its timeout", tc.name, took)
		}
		conn.Abort()
		c.Close()
	}
	// Between batches: waits past the timeout, then talks.
	conn2, c2, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: "waits", Dest: "data/y"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	defer conn2.Abort()
	for _, wait := range []time.Duration{time.Second, 150 * time.Millisecond, 150 * time.Millisecond, time.Second} {
		time.Sleep(wait)
		if err := conn2.Prune(ctx, &wire.PruneRequest{}, func(*wire.PruneResult) {}); err != nil {
			t.Fatalf("a stream that waited %s between requests was cut: %v", wait, err)
		}
	}
}

// TestServeCaps: past --max-jobs a new job is refused, past --max-conns a
// new stream is, each saying so; the streams already in are served.
func TestServeCaps(t *testing.T) {
	l := DefaultLimits
	l.MaxJobs, l.MaxConns = 1, 2
	_, addr, cfg, _ := inProcServe(t, l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a0, c0, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: "a", Dest: "data/a"})
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	defer a0.Abort()
	if _, _, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: "b", Dest: "data/b"}); err == nil || !strings.Contains(err.Error(), "busy: 1 jobs running (serve --max-jobs)") {
		t.Errorf("a second job past --max-jobs 1: %v, want refused as busy", err)
	}
	a1, c1, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: "a", Index: 1, Dest: "data/a"})
	if err != nil {
		t.Fatalf("the job's second stream: %v", err)
	}
	defer c1.Close()
	defer a1.Abort()
	if _, _, err := dialFrom(ctx, "127.0.0.1", addr, cfg, dataplane.Greeting{Token: testToken, Job: "a", Index: 2, Dest: "data/a"}); err == nil || !strings.Contains(err.Error(), "busy: 2 streams open (serve --max-conns)") {
		t.Errorf("a third stream past --max-conns 2: %v, want refused as busy", err)
	}
	if err := a0.Prune(ctx, &wire.PruneRequest{}, func(*wire.PruneResult) {}); err != nil {
		t.Errorf("a stream already in, after the refusals: %v", err)
	}
}

// TestServeGreetingNotLogged: what a malformed greeting, a stranger's
// line, a wrong token and a refused destination put in serve's log holds
// no part of the token that came with them.
func TestServeGreetingNotLogged(t *testing.T) {
	_, addr, cfg, log := inProcServe(t, DefaultLimits, nil)
	const other = "zq9Xw7Kp4Lm2Vb8Nc5Hd"
	lines := []string{
		"BULKMOVE-SERVE " + testToken + " job\n",
		"BULKMOVE-SERVE " + testToken + " job x \"data\"\n",
		"BULKMOVE-SERVE " + testToken + " job 1 data\n",
		"BULKMOVE-SERVEX " + testToken + " job 1 \"data\"\n",
		testToken + "\n",
		"BULKMOVE-SERVE " + other + " job 1 \"data\"\n",
		"BULKMOVE-SERVE " + testToken + " job 1 \"nope/x\"\n",
		"BULKMOVE-SERVE " + testToken + " job 1 \"data/../x\"\n",
	}
	for _, line := range lines {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, line)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c) // its refusal, then the close
		c.Close()
	}
	time.Sleep(200 * time.Millisecond) // the log lines of the last
	if n := strings.Count(log.String(), "serve: 127.0.0.1:"); n < len(lines) {
		t.Errorf("%d refusals logged, want %d:\n%s", n, len(lines), log)
	}
	assertNoToken(t, log.String(), testToken, other)
}

// TestServeHelloDeadline: a stream that greets and then says nothing (no
// Hello) is closed once the handshake's time is up, and its job's
// destination let go.
func TestServeHelloDeadline(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 300 * time.Millisecond
	s, addr, ccfg, _ := inProcServe(t, DefaultLimits, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dataplane.DialServe(ctx, addr, ccfg, dataplane.Greeting{Token: s.cfg.Token, Job: "j", Dest: "data/x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection is still open %s after a greeting without a Hello", time.Since(start).Round(time.Millisecond))
	}
	if !jobsGone(s, 5*time.Second) {
		t.Fatalf("the job still holds its destination after its stream was closed")
	}
}

// lockedBuf is a bytes.Buffer safe for concurrent use.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
