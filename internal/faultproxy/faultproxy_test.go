package faultproxy

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// echo starts a TCP echo server.
func echo(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String(), func() { ln.Close() }
}

func TestForwardAndCut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	target, stop := echo(t)
	defer stop()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("x"), 1000)
	c.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through the proxy: %v", err)
	}
	c.Close()

	// Cut after 1500 bytes: 1000 out and 500 back, then the connection ends.
	p.CutAfter(1500)
	c, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(msg)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.ReadFull(c, got)
	if err == nil || n != 500 {
		t.Errorf("after the cut: read %d bytes, err %v; want 500 and an error", n, err)
	}
	if p.Cuts.Load() != 1 {
		t.Errorf("%d cuts, want 1", p.Cuts.Load())
	}
}

func TestStallAndCutAll(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	target, stop := echo(t)
	defer stop()
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Stall(true)
	c.Write([]byte("hello"))
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := c.Read(make([]byte, 5)); n != 0 {
		t.Errorf("a stalled proxy forwarded %d bytes", n)
	}
	for p.Open() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.CutAll()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 5)); err == nil {
		t.Errorf("read after CutAll: no error")
	}
	p.Stall(false)
}

// TestRate: two connections that write all they can through a proxy
// capped at 4 MB/s deliver 4 MB/s between them (within 20%, measured at
// the far end once the buffers are full).
func TestRate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					got.Add(int64(n))
					if err != nil {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const rate = 4e6
	p.Rate(rate)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				c.Write(buf)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	n0, t0 := got.Load(), time.Now()
	time.Sleep(time.Second)
	n1, t1 := got.Load(), time.Now()
	close(stop)
	wg.Wait()
	r := float64(n1-n0) / t1.Sub(t0).Seconds()
	t.Logf("%.2f MB/s", r/1e6)
	if r < 0.8*rate || r > 1.2*rate {
		t.Errorf("%.2f MB/s through a proxy capped at %.0f MB/s", r/1e6, rate/1e6)
	}
}
