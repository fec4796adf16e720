package dataplane

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestOfferAndPorts(t *testing.T) {
	o := Offer{Mode: TLS, Port: 50001, Fingerprint: strings.Repeat("ab", 32), Token: strings.Repeat("c", 48)}
	got, err := ParseOffer(o.String())
	if err != nil || got != o {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "data=tls:1:x:y", "data=udp:1:-:" + strings.Repeat("c", 48), "data=tcp:0:-:" + strings.Repeat("c", 48), "data=tls:5:-:" + strings.Repeat("c", 48)} {
		if _, err := ParseOffer(bad); err == nil {
			t.Errorf("ParseOffer(%q): no error", bad)
		}
	}
	if lo, hi, err := ParsePorts("50000-50100"); err != nil || lo != 50000 || hi != 50100 {
		t.Errorf("ParsePorts: %d %d %v", lo, hi, err)
	}
	for _, bad := range []string{"x", "5-1", "0-70000", "1-2-3"} {
		if _, _, err := ParsePorts(bad); err == nil {
			t.Errorf("ParsePorts(%q): no error", bad)
		}
	}
}

func TestStreams(t *testing.T) {
	for _, mode := range []Mode{TLS, TCP} {
		t.Run(string(mode), func(t *testing.T) {
			l := listen(t, mode, 2)
			type acc struct {
				idx int
				msg string
			}
			got := make(chan acc, 4)
			go func() {
				for {
					c, i, err := l.Accept()
					if err != nil {
						close(got)
						return
					}
					b := make([]byte, 5)
					io.ReadFull(c, b)
					c.Write([]byte("pong!"))
					got <- acc{i, string(b)}
					c.Close()
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			o := l.Offer()
			// A stranger without the token, and one with another
			// fingerprint's offer, are turned away.
			if c, err := Dial(ctx, "127.0.0.1", Offer{Mode: mode, Port: o.Port, Fingerprint: o.Fingerprint, Token: strings.Repeat("0", 48)}, 0); err == nil {
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if n, _ := c.Read(make([]byte, 1)); n != 0 {
					t.Errorf("a wrong token got an answer")
				}
				c.Close()
			}
			if mode == TLS {
				bad := o
				bad.Fingerprint = strings.Repeat("00", 32)
				if c, err := Dial(ctx, "127.0.0.1", bad, 0); err == nil || !strings.Contains(err.Error(), "not the pinned") {
					if c != nil {
						c.Close()
					}
					t.Errorf("Dial with another fingerprint: %v, want a refusal", err)
				}
			}
			for i := range 2 {
				c, err := Dial(ctx, "127.0.0.1", o, i)
				if err != nil {
					t.Fatal(err)
				}
				c.Write([]byte("ping!"))
				b := make([]byte, 5)
				if _, err := io.ReadFull(c, b); err != nil || string(b) != "pong!" {
					t.Fatalf("stream %d: %q %v", i, b, err)
				}
				c.Close()
			}
			seen := map[int]bool{}
			for a := range got {
				if a.msg != "ping!" || seen[a.idx] {
					t.Errorf("accepted %+v", a)
				}
				seen[a.idx] = true
			}
			if len(seen) != 2 {
				t.Errorf("accepted streams %v, want 0 and 1", seen)
			}
			// After K streams the listener is closed (the accepting
			// goroutine above ended on Accept's error), and Accept says so
			// again at once. Not checked by dialing a third stream: on a
			// machine running other tests, another listener took the freed
			// port at once, and the dial met it.
			if c, _, err := l.Accept(); err == nil {
				c.Close()
				t.Errorf("Accept gave a third stream")
			}
		})
	}
}

// TestSilentStranger: a connection that says nothing (a port scanner, a
// half-open probe) does not hold up the job's streams: they are admitted
// while it waits out its deadline.
func TestSilentStranger(t *testing.T) {
	for _, mode := range []Mode{TLS, TCP} {
		t.Run(string(mode), func(t *testing.T) {
			l := listen(t, mode, 2)
			o := l.Offer()
			silent, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)))
			if err != nil {
				t.Fatal(err)
			}
			defer silent.Close()
			go func() {
				for {
					c, _, err := l.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						b := make([]byte, 5)
						if _, err := io.ReadFull(c, b); err == nil {
							c.Write(b)
						}
					}()
				}
			}()
			time.Sleep(50 * time.Millisecond) // the stranger is first in line
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			for i := range 2 {
				c, err := Dial(ctx, "127.0.0.1", o, i)
				if err != nil {
					t.Fatalf("stream %d: %v", i, err)
				}
				c.SetDeadline(time.Now().Add(3 * time.Second))
				c.Write([]byte("echo!"))
				b := make([]byte, 5)
				if _, err := io.ReadFull(c, b); err != nil || string(b) != "echo!" {
					t.Fatalf("stream %d behind a silent stranger: %q %v", i, b, err)
				}
				c.Close()
			}
		})
	}
}

// listen listens for k streams in mode, until the test ends.
func listen(t *testing.T, mode Mode, k int) *Listener {
	t.Helper()
	l, err := Listen(mode, "127.0.0.1", "", k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestGreetingBounded: a peer that sends no newline makes ReadGreeting
// give up after 8 KiB, read as it arrives, not after the whole line (an
// unauthenticated peer must not make the server hold what it sends).
func TestGreetingBounded(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	var sent atomic.Int64
	go func() {
		chunk := []byte(strings.Repeat("x", 1024))
		for range 1024 { // 1 MiB, no newline
			n, err := b.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		b.Close()
	}()
	_, err := ReadGreeting(a)
	a.Close()
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("ReadGreeting: %v, want the greeting too long", err)
	}
	if n := sent.Load(); n > 9<<10 {
		t.Errorf("ReadGreeting took %d bytes of a greeting without a newline, want at most 8 KiB", n)
	}
	// A greeting as senders send it still reads.
	// (A pipe of its own: the writer above may still hold b.)
	c, d := net.Pipe()
	defer c.Close()
	want := Greeting{Token: "tok-0123456789abcdef", Job: "j1", Index: 2, Dest: "data/a b"}
	go func() { WriteGreeting(d, want); d.Close() }()
	if g, err := ReadGreeting(c); err != nil || g != want {
		t.Errorf("ReadGreeting: %+v %v, want %+v", g, err, want)
	}
}

// TestStreamGreetingBounded: on the agent's data-plane port, a stranger
// that sends no newline is dropped after a few hundred bytes, not read
// until it stops: its writes fail long before 16 MiB are through.
func TestStreamGreetingBounded(t *testing.T) {
	l := listen(t, TCP, 1)
	go l.Accept()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Offer().Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	chunk := []byte(strings.Repeat("x", 64<<10))
	sent := 0
	for sent < 16<<20 {
		n, err := c.Write(chunk)
		sent += n
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			break // still held open, reading
		}
		if err != nil {
			return // dropped
		}
	}
	t.Errorf("the agent still reads a greeting without a newline after %d bytes", sent)
}

// TestBadGreetingHidesToken: a malformed greeting is described (for the
// log and for the sender) without the token it carries.
func TestBadGreetingHidesToken(t *testing.T) {
	const tok = "s3cret-token-0123456789"
	for _, line := range []string{
		"BULKMOVE-SERVE " + tok + " job\n",
		"BULKMOVE-SERVE " + tok + " job x \"data\"\n",
		"BULKMOVE-SERVE " + tok + " job 1 data\n",
	} {
		a, b := net.Pipe()
		go func() { io.WriteString(b, line); b.Close() }()
		_, err := ReadGreeting(a)
		a.Close()
		if err == nil || strings.Contains(err.Error(), tok) {
			t.Errorf("%q: %v, want an error without the token", line, err)
		}
	}
}
