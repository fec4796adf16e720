package dataplane

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

func tcpAddr(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }

// TestGateLimits: at most PerPeer from one peer (an IPv6 /64 is one),
// Max in all; leaving makes room again.
func TestGateLimits(t *testing.T) {
	g := NewGate(5, 2)
	var keys []string
	for _, a := range []string{"10.0.0.1", "10.0.0.1", "2001:db8::1", "2001:db8::ffff:2"} {
		k, err := g.Enter(tcpAddr(a))
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		keys = append(keys, k)
	}
	for _, a := range []string{"10.0.0.1", "2001:db8::3"} {
		if _, err := g.Enter(tcpAddr(a)); !errors.Is(err, ErrBusy) {
			t.Errorf("%s, its peer's third: %v, want ErrBusy", a, err)
		}
	}
	if _, err := g.Enter(tcpAddr("10.0.0.2")); err != nil {
		t.Errorf("another peer: %v", err)
	}
	if _, err := g.Enter(tcpAddr("10.0.0.3")); !errors.Is(err, ErrBusy) {
		t.Errorf("past Max: %v, want ErrBusy", err)
	}
	g.Leave(keys[0])
	if _, err := g.Enter(tcpAddr("10.0.0.1")); err != nil {
		t.Errorf("after a leave: %v", err)
	}
}

// TestGateWrongTokens: a peer's wrong tokens wait longer each time, up to
// the cap; LockoutAfter of them lock the peer out (others still enter);
// the lockout ends.
func TestGateWrongTokens(t *testing.T) {
	g := &Gate{Max: 10, PerPeer: 2, FailDelay: 20 * time.Millisecond, MaxFailDelay: 80 * time.Millisecond,
		LockoutAfter: 4, Lockout: 300 * time.Millisecond, Forget: time.Minute}
	var locked string
	g.Locked = func(peer string, fails int, d time.Duration) { locked = peer }
	ctx := context.Background()
	for i, want := range []time.Duration{20, 40, 80, 80} {
		k, err := g.Enter(tcpAddr("10.0.0.9"))
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		start := time.Now()
		g.Failed(ctx, k)
		if took := time.Since(start); took < want*time.Millisecond {
			t.Errorf("wrong token %d refused after %s, want %s", i+1, took, want*time.Millisecond)
		}
		g.Leave(k)
	}
	if locked != "10.0.0.9" {
		t.Errorf("no lockout reported (%q)", locked)
	}
	if _, err := g.Enter(tcpAddr("10.0.0.9")); !errors.Is(err, ErrLocked) {
		t.Errorf("after 4 wrong tokens: %v, want ErrLocked", err)
	}
	if k, err := g.Enter(tcpAddr("10.0.0.10")); err != nil {
		t.Errorf("another peer: %v", err)
	} else {
		g.Leave(k)
	}
	time.Sleep(350 * time.Millisecond)
	if k, err := g.Enter(tcpAddr("10.0.0.9")); err != nil {
		t.Errorf("after the lockout: %v", err)
	} else {
		g.Leave(k)
	}
}

// TestStreamHandshakeCap: on the agent's data-plane port, a stranger
// holds at most a few connections in their handshake (silent ones here,
// which would each wait out the 15 s deadline): the next one from the
// same address is closed at once, and the job's own stream, from another
// address, still gets in.
func TestStreamHandshakeCap(t *testing.T) {
	for _, mode := range []Mode{TLS, TCP} {
		t.Run(string(mode), func(t *testing.T) {
			l, err := Listen(mode, "127.0.0.1", "", 1)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				if c, _, err := l.Accept(); err == nil {
					c.Write([]byte("ok"))
					c.Close()
				}
			}()
			o := l.Offer()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port))
			stranger := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			for range l.gate.PerPeer {
				c, err := stranger.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				l.gate.mu.Lock()
				n := l.gate.open
				l.gate.mu.Unlock()
				if n == l.gate.PerPeer {
					break // accepted, in their handshakes
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of the stranger's %d connections accepted", n, l.gate.PerPeer)
				}
			}
			c, err := stranger.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			start := time.Now()
			if _, err := c.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
				t.Errorf("a stranger's connection past its limit: %v after %s, want it closed at once", err, time.Since(start).Round(time.Millisecond))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := Dial(ctx, "127.0.0.1", o, 0)
			if err != nil {
				t.Fatalf("the job's stream: %v", err)
			}
			defer s.Close()
			s.SetReadDeadline(time.Now().Add(3 * time.Second))
			if b, err := io.ReadAll(s); string(b) != "ok" {
				t.Errorf("the job's stream beside the stranger: %q %v", b, err)
			}
		})
	}
}

func isReset(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestGateLog: a peer's failed handshakes are logged 10 a minute; the
// count of the rest comes with the next one logged.
func TestGateLog(t *testing.T) {
	g := NewGate(10, 10)
	k, _ := g.Enter(tcpAddr("10.0.0.5"))
	defer g.Leave(k)
	logged := 0
	for range 25 {
		if ok, _ := g.Log(k); ok {
			logged++
		}
	}
	if logged != logBurst {
		t.Errorf("%d of 25 logged, want %d", logged, logBurst)
	}
	g.peers[k].logFrom = time.Now().Add(-2 * time.Minute) // a minute later
	if ok, unlogged := g.Log(k); !ok || unlogged != 25-logBurst {
		t.Errorf("a minute later: logged %v, with %d not logged before it, want %d", ok, unlogged, 25-logBurst)
	}
}
