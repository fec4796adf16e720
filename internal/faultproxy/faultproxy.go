// Package faultproxy is a TCP proxy for tests that breaks connections on
// purpose: it cuts a connection after N bytes, resets it, stalls it,
// slows it, or cuts every connection at once, so that tests can check how
// the sender and the agent survive a bad network. It can also cap the
// rate of its connections, together, as a slow link does.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
)

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	cutAfter atomic.Int64 // bytes (both directions) after which a connection is cut; 0: never
	stall    atomic.Bool  // stop forwarding (connections stay open, silent)
	delay    atomic.Int64 // nanoseconds to sleep before forwarding each chunk
	reset    atomic.Bool  // cut with a TCP reset instead of a FIN
	// up and down cap what all connections forward together, each way.
	up, down *ratelimit.Bucket
	hold     atomic.Int64 // connections beyond this many wait before reaching the target; 0: none wait
	accepted atomic.Int64

	mu     sync.Mutex
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup

	// Cuts counts the connections the proxy broke.
	Cuts atomic.Int64
}

type pair struct{ a, b net.Conn }

// Start listens on 127.0.0.1 and forwards every connection to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{},
		up: ratelimit.NewAdjustable(0), down: ratelimit.NewAdjustable(0)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the port of Addr.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// CutAfter makes every connection, new or open, break once n bytes
// (counted in both directions, from its start) have passed; 0 turns it off.
func (p *Proxy) CutAfter(n int64) { p.cutAfter.Store(n) }

// Reset makes cuts TCP resets (RST) rather than orderly closes.
func (p *Proxy) Reset(on bool) { p.reset.Store(on) }

// Stall stops (or resumes) forwarding: connections stay open but silent.
func (p *Proxy) Stall(on bool) { p.stall.Store(on) }

// Slow delays every forwarded chunk by d.
func (p *Proxy) Slow(d time.Duration) { p.delay.Store(int64(d)) }

// linkBuffer is the socket buffer of a capped link's proxy.
const linkBuffer = 64 << 10

// Rate caps what the proxy forwards, all connections together, at
// bytesPerSec bytes a second each way (a token bucket), as a slow link
// would: the sender's socket buffers fill, then its writes wait. 0 lifts
// the cap. Connections made while a cap is set get small buffers.
func (p *Proxy) Rate(bytesPerSec int64) {
	p.up.SetRate(bytesPerSec)
	p.down.SetRate(bytesPerSec)
}

// HoldAfter makes the connections accepted after the first n (counted
// from the proxy's start) wait, silent, before the proxy even connects
// them to the target (a slow handshake); 0 lets those waiting go on.
func (p *Proxy) HoldAfter(n int) { p.hold.Store(int64(n)) }

// CutAll breaks every open connection now.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.cut(c)
	}
}

// Open is the number of connections open now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.a.Close()
		c.b.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) cut(c *pair) {
	p.Cuts.Add(1)
	if p.reset.Load() {
		for _, x := range []net.Conn{c.a, c.b} {
			if tc, ok := x.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
		}
	}
	c.a.Close()
	c.b.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		a, err := p.ln.Accept()
		if err != nil {
			return
		}
		k := p.accepted.Add(1)
		if h := p.hold.Load(); h > 0 && k > h {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				for h := p.hold.Load(); h > 0 && k > h; h = p.hold.Load() {
					time.Sleep(10 * time.Millisecond)
					if p.isClosed() {
						a.Close()
						return
					}
				}
				p.forward(a)
			}()
			continue
		}
		if !p.forward(a) {
			return
		}
	}
}

// forward connects a to the target; false: the proxy is closed.
func (p *Proxy) forward(a net.Conn) bool {
	b, err := net.Dial("tcp", p.target)
	if err != nil {
		a.Close()
		return true
	}
	if p.up.Rate() > 0 {
		// A capped link's queue is its bucket: the proxy's own socket
		// buffers stay small, so that the sender's writes wait on
		// the cap after a link's worth of buffering, not after
		// megabytes of a loopback socket's.
		a.(*net.TCPConn).SetReadBuffer(linkBuffer)
		b.(*net.TCPConn).SetWriteBuffer(linkBuffer)
	}
	c := &pair{a, b}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		a.Close()
		b.Close()
		return false
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	var moved atomic.Int64
	var both sync.WaitGroup
	both.Add(2)
	p.wg.Add(3)
	go p.pipe(c, a, b, p.up, &moved, &both)
	go p.pipe(c, b, a, p.down, &moved, &both)
	go func() {
		defer p.wg.Done()
		both.Wait()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		a.Close()
		b.Close()
	}()
	return true
}

func (p *Proxy) pipe(c *pair, from, to net.Conn, rate *ratelimit.Bucket, moved *atomic.Int64, both *sync.WaitGroup) {
	defer p.wg.Done()
	defer both.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		for n > 0 && p.stall.Load() {
			time.Sleep(10 * time.Millisecond)
			if p.isClosed() {
				return
			}
		}
		if d := p.delay.Load(); d > 0 && n > 0 {
			time.Sleep(time.Duration(d))
		}
		rate.Wait(n)
		if n > 0 {
			chunk := buf[:n]
			if limit := p.cutAfter.Load(); limit > 0 {
				total := moved.Add(int64(n))
				if total >= limit {
					// Forward what fits, then cut.
					if keep := int64(n) - (total - limit); keep > 0 {
						to.Write(chunk[:keep])
					}
					p.mu.Lock()
					p.cut(c)
					p.mu.Unlock()
					return
				}
			}
			if _, werr := to.Write(chunk); werr != nil {
				from.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Half-close: the other direction may still flow.
				if tc, ok := to.(*net.TCPConn); ok {
					tc.CloseWrite()
					return
				}
			}
			to.Close()
			return
		}
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}
