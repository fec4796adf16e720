package faultproxy

import (
	"bytes"
	"io"
	"net"
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
