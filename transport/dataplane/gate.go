package dataplane

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Gate admits connections that have not authenticated yet, for `bulkmove
// serve` and the agent's data-plane port: at most Max handshakes at once
// in all and PerPeer from one peer (an IPv4 address, an IPv6 /64: what
// one party holds), none from a peer locked out for wrong tokens. A
// connection over a limit is closed at once, before TLS and before any
// read: it costs an accept and a close, no goroutine and no buffer.
//
// Wrong tokens are slowed and limited per peer: the refusal of a peer's
// n-th wrong token waits FailDelay doubled n-1 times (at most
// MaxFailDelay), holding the peer's handshake slot meanwhile, so that the
// peer's guesses in flight are at most PerPeer and each takes its delay;
// LockoutAfter wrong tokens, each within Forget of the one before, lock
// the peer out for Lockout. A right token clears the peer's count.
type Gate struct {
	Max, PerPeer int
	FailDelay    time.Duration
	MaxFailDelay time.Duration
	LockoutAfter int
	Lockout      time.Duration
	Forget       time.Duration
	// Locked, if set, is told when a peer is locked out (for the log).
	Locked func(peer string, fails int, d time.Duration)

	mu    sync.Mutex
	open  int
	peers map[string]*peerState
}

type peerState struct {
	open     int
	fails    int
	lastFail time.Time
	until    time.Time // locked out until then
	// Its failed handshakes logged in the minute from logFrom, and
	// those not logged.
	logFrom          time.Time
	logged, unlogged int
}

// logBurst failed handshakes of a peer are logged a minute; the rest are
// counted, and the count logged with the next one logged.
const logBurst = 10

// NewGate is a gate with the limits of `bulkmove serve` (see Gate): max
// handshakes in all, perPeer from one peer; wrong tokens delayed from
// 250 ms doubling to 4 s, 10 in a row (each within 10 minutes of the last)
// lock the peer out for 5 minutes.
func NewGate(max, perPeer int) *Gate {
	return &Gate{Max: max, PerPeer: perPeer,
		FailDelay: 250 * time.Millisecond, MaxFailDelay: 4 * time.Second,
		LockoutAfter: 10, Lockout: 5 * time.Minute, Forget: 10 * time.Minute}
}

// maxPeers bounds the peers a gate remembers: past it, the record of a
// peer with nothing open is forgotten to make room (a party with that many
// addresses can reset its own count, no more).
const maxPeers = 4096

// Errors of Enter.
var (
	ErrBusy   = errors.New("too many connections authenticating")
	ErrLocked = errors.New("locked out after wrong tokens")
)

// PeerKey is the peer a remote address counts as: its IP, or for IPv6 its
// /64.
func PeerKey(a net.Addr) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return a.String()
		}
		ip = net.ParseIP(host)
		if ip == nil {
			return host
		}
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// Enter admits a connection from addr, or says why not (ErrBusy,
// ErrLocked). An admitted connection's peer is returned, for Failed and
// Leave.
func (g *Gate) Enter(addr net.Addr) (string, error) {
	key := PeerKey(addr)
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	p := g.peers[key]
	if p != nil && now.Before(p.until) {
		return "", ErrLocked
	}
	if g.open >= g.Max || p != nil && p.open >= g.PerPeer {
		return "", ErrBusy
	}
	if p == nil {
		if g.peers == nil {
			g.peers = map[string]*peerState{}
		}
		if len(g.peers) >= maxPeers && !g.evictLocked(now) {
			return "", ErrBusy
		}
		p = &peerState{}
		g.peers[key] = p
	}
	p.open++
	g.open++
	return key, nil
}

// evictLocked makes room for a peer: the stale records first, else any
// peer with nothing open.
func (g *Gate) evictLocked(now time.Time) bool {
	for k, p := range g.peers {
		if p.open == 0 && g.staleLocked(p, now) {
			delete(g.peers, k)
		}
	}
	if len(g.peers) < maxPeers {
		return true
	}
	for k, p := range g.peers {
		if p.open == 0 {
			delete(g.peers, k)
			return true
		}
	}
	return false
}

func (g *Gate) staleLocked(p *peerState, now time.Time) bool {
	return now.After(p.until) && (p.fails == 0 || now.Sub(p.lastFail) > g.Forget) && now.Sub(p.logFrom) > time.Minute
}

// Log says whether to log a failed handshake of an admitted peer: the
// first logBurst of a minute are, with the count of those that were not
// before them; the rest are not (a stranger's connections must not fill
// the log).
func (g *Gate) Log(key string) (ok bool, unlogged int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.peers[key]
	if p == nil {
		return true, 0
	}
	if now := time.Now(); now.Sub(p.logFrom) > time.Minute {
		p.logFrom, p.logged = now, 0
	}
	if p.logged >= logBurst {
		p.unlogged++
		return false, 0
	}
	p.logged++
	unlogged, p.unlogged = p.unlogged, 0
	return true, unlogged
}

// Leave ends an admitted connection's handshake (authenticated or not).
func (g *Gate) Leave(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open--
	p := g.peers[key]
	if p == nil {
		return
	}
	if p.open--; p.open == 0 && g.staleLocked(p, time.Now()) {
		delete(g.peers, key)
	}
}

// Succeeded clears the peer's wrong tokens.
func (g *Gate) Succeeded(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.peers[key]; p != nil {
		p.fails = 0
	}
}

// Failed counts a wrong token from the peer and waits its delay (or until
// ctx ends), the connection still counted against the peer.
func (g *Gate) Failed(ctx context.Context, key string) {
	g.mu.Lock()
	now := time.Now()
	p := g.peers[key]
	if p == nil { // not admitted by this gate: nothing to count against
		g.mu.Unlock()
		return
	}
	if p.fails > 0 && now.Sub(p.lastFail) > g.Forget {
		p.fails = 0
	}
	p.fails++
	p.lastFail = now
	fails := p.fails
	d := g.FailDelay
	for i := 1; i < fails && d < g.MaxFailDelay; i++ {
		d *= 2
	}
	d = min(d, g.MaxFailDelay)
	locked := g.LockoutAfter > 0 && fails >= g.LockoutAfter
	if locked {
		p.until = now.Add(g.Lockout)
		p.fails = 0
	}
	g.mu.Unlock()
	if locked && g.Locked != nil {
		g.Locked(key, fails, g.Lockout)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
