// Package dataplane carries a job's streams over direct TCP connections
// instead of SSH channels (--transport tls or tcp): SSH only authenticates
// and starts the agent, which listens on a port (from a configurable range,
// for firewalls) and tells the sender, over the SSH channel, the port, a
// one-time token and, for TLS, the SHA-256 fingerprint of a throwaway
// certificate. The sender opens K connections (TLS 1.3 pinning that
// fingerprint), each presenting the token and its stream index first; the
// agent accepts each index once and stops listening after K.
//
// TLS costs one cipher per stream in each process, no SSH channel window
// (TCP's own autotuning instead of 2 MiB a round trip), and no copy through
// sshd. tcp is unencrypted and only for networks that are trusted anyway;
// the token still keeps others out.
package dataplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mode is how streams travel: TLS or plain TCP.
type Mode string

const (
	TLS Mode = "tls"
	TCP Mode = "tcp"
)

// Offer is what the agent tells the sender: where and how to connect.
type Offer struct {
	Mode        Mode
	Port        int
	Fingerprint string // hex SHA-256 of the certificate (TLS)
	Token       string
}

// String is the offer as it travels in the agent's banner:
// "data=MODE:PORT:FINGERPRINT:TOKEN" (FINGERPRINT "-" for tcp).
func (o Offer) String() string {
	fp := o.Fingerprint
	if fp == "" {
		fp = "-"
	}
	return fmt.Sprintf("data=%s:%d:%s:%s", o.Mode, o.Port, fp, o.Token)
}

// ParseOffer reads an offer from its String form. Its errors do not
// quote the offer: it holds the token.
func ParseOffer(s string) (Offer, error) {
	rest, ok := strings.CutPrefix(s, "data=")
	f := strings.Split(rest, ":")
	if !ok || len(f) != 4 {
		return Offer{}, fmt.Errorf("bad data-plane offer (%d fields, want data=MODE:PORT:FINGERPRINT:TOKEN)", len(f))
	}
	port, err := strconv.Atoi(f[1])
	if err != nil || port <= 0 || port > 65535 {
		return Offer{}, fmt.Errorf("bad port %q in data-plane offer", f[1])
	}
	o := Offer{Mode: Mode(f[0]), Port: port, Fingerprint: f[2], Token: f[3]}
	if o.Fingerprint == "-" {
		o.Fingerprint = ""
	}
	if o.Mode != TLS && o.Mode != TCP || o.Mode == TLS && len(o.Fingerprint) != 64 || len(o.Token) < 32 {
		return Offer{}, fmt.Errorf("bad data-plane offer (mode %q, a %d-digit fingerprint, a %d-character token)", o.Mode, len(o.Fingerprint), len(o.Token))
	}
	return o, nil
}

// ParsePorts reads a port range "50000-50100" (or one port; "" or "0":
// any free port).
func ParsePorts(s string) (lo, hi int, err error) {
	if s == "" || s == "0" {
		return 0, 0, nil
	}
	a, b, found := strings.Cut(s, "-")
	if !found {
		b = a
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("invalid port range %q (want e.g. 50000-50100)", s)
	}
	return lo, hi, nil
}

// Host is the address a data plane listens on: the one asked for, else
// the one the SSH connection that started this process reached this host
// on (the server address in SSH_CONNECTION, which the host at the other
// end can reach; the host's other networks are not offered), else,
// outside SSH, all.
func Host(asked string) string {
	if asked != "" {
		return strings.Trim(asked, "[]")
	}
	if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 && net.ParseIP(f[2]) != nil {
		return f[2]
	}
	return ""
}

// Listener is the listening end: an agent's, or the sender's of a
// remote-to-remote move that box2's agent dials (see DialSender).
type Listener struct {
	ln    net.Listener
	offer Offer
	tls   *tls.Config
	k     int
	gate  *Gate // strangers' handshakes, at most so many at once
	// stop ends a wrong token's delay when the listener closes.
	stop     context.Context
	stopFunc context.CancelFunc

	mu       sync.Mutex
	used     map[int]bool
	accepted int

	// The accept loop (started by the first Accept) admits each
	// connection in a goroutine of its own: one at a time, the K streams'
	// handshakes each waited for the one before, a round trip apiece (on
	// a 100 ms path the 4th stream was up 300 ms after the 1st).
	loop     sync.Once
	admitted chan admitted // buffered k: an admission never waits
	done     chan struct{} // closed when the loop ends; then loopErr
	loopErr  error
}

type admitted struct {
	conn  net.Conn
	index int
}

// Listen listens on host (an address of this machine; "" for all of
// them) at the first free port of ports (see ParsePorts) for k streams in
// the given mode.
func Listen(mode Mode, host, ports string, k int) (*Listener, error) {
	lo, hi, err := ParsePorts(ports)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	for p := lo; ; p++ {
		ln, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil || p >= hi {
			break
		}
	}
	if err != nil {
		if ports == "" {
			return nil, err
		}
		return nil, fmt.Errorf("no free port in %s: %w", ports, err)
	}
	var tok [24]byte
	rand.Read(tok[:])
	l := &Listener{ln: ln, k: k, used: map[int]bool{},
		// The sender's K streams come from one peer at once; room for
		// them beside strangers.
		gate:  NewGate(2*k+16, k+4),
		offer: Offer{Mode: mode, Port: ln.Addr().(*net.TCPAddr).Port, Token: hex.EncodeToString(tok[:])}}
	l.stop, l.stopFunc = context.WithCancel(context.Background())
	if mode == TLS {
		cert, fp, err := selfSigned()
		if err != nil {
			ln.Close()
			return nil, err
		}
		l.offer.Fingerprint = fp
		l.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	}
	return l, nil
}

// Offer is what to tell the sender.
func (l *Listener) Offer() Offer { return l.offer }

// Addr is where the listener listens.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening.
func (l *Listener) Close() error {
	l.stopFunc()
	return l.ln.Close()
}

// Accept returns the next stream that presented the token and an index not
// seen yet; connections that do not are dropped. After k streams, or when
// the listener is closed, it returns an error. Connections are admitted
// (their handshakes run) at once, whoever calls Accept.
func (l *Listener) Accept() (conn net.Conn, index int, err error) {
	l.Admit()
	select {
	case a := <-l.admitted:
		return a.conn, a.index, nil
	case <-l.done:
		select { // admitted just before the end
		case a := <-l.admitted:
			return a.conn, a.index, nil
		default:
		}
		return nil, 0, l.loopErr
	}
}

// Admit starts admitting connections (their handshakes) now, before the
// first Accept: a peer that dials before its streams are taken (box2's
// agent, told to dial while box1's job still walks) must not wait for
// its handshakes until they are.
func (l *Listener) Admit() {
	l.loop.Do(func() {
		l.admitted, l.done = make(chan admitted, l.k), make(chan struct{})
		go l.acceptLoop()
	})
}

func (l *Listener) acceptLoop() {
	defer close(l.done)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			l.mu.Lock()
			if l.accepted >= l.k {
				err = errors.New("all streams accepted")
			}
			l.mu.Unlock()
			l.loopErr = err
			return
		}
		// Over the gate's limits, closed at once: nothing read, no
		// goroutine.
		peer, err := l.gate.Enter(c.RemoteAddr())
		if err != nil {
			c.Close()
			continue
		}
		go func() {
			if err := l.admit(c, peer); err != nil {
				c.Close() // a stranger, or a replay: not ours
			}
		}()
	}
}

// admit runs c's handshake and checks its greeting; if it is one of the
// job's streams, it hands it to Accept.
func (l *Listener) admit(c net.Conn, peer string) error {
	defer l.gate.Leave(peer)
	c.SetDeadline(time.Now().Add(15 * time.Second))
	conn := c
	if l.tls != nil {
		tc := tlsServer(c, l.tls)
		if err := tc.Handshake(); err != nil {
			return err
		}
		conn = tc
	}
	line, err := readLine(conn, maxStreamGreeting)
	if err != nil {
		return err
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "BULKMOVE-STREAM" || subtle.ConstantTimeCompare([]byte(f[1]), []byte(l.offer.Token)) != 1 {
		l.gate.Failed(l.stop, peer)
		return errors.New("bad greeting")
	}
	l.gate.Succeeded(peer)
	index, err := strconv.Atoi(f[2])
	if err != nil || index < 0 || index >= l.k {
		return errors.New("bad stream index")
	}
	l.mu.Lock()
	if l.used[index] {
		l.mu.Unlock()
		return errors.New("stream index used already")
	}
	l.used[index] = true
	l.accepted++
	last := l.accepted == l.k
	l.mu.Unlock()
	c.SetDeadline(time.Time{})
	// Handed over before the listener closes after the last one (the
	// loop ends then, and Accept looks here once more).
	l.admitted <- admitted{conn, index}
	if last {
		l.ln.Close()
	}
	return nil
}

// maxStreamGreeting bounds a data-plane stream's greeting line.
const maxStreamGreeting = 256

// readLine reads a line of at most max bytes, newline included, one byte
// at a time: nothing past it is read (the stream's frames follow), and a
// peer that sends no newline is refused at max bytes, not held on to.
func readLine(c net.Conn, max int) (string, error) {
	var buf []byte
	for b := make([]byte, 1); ; {
		if _, err := io.ReadFull(c, b); err != nil {
			return "", err
		}
		buf = append(buf, b[0])
		if b[0] == '\n' {
			return string(buf), nil
		}
		if len(buf) >= max {
			return "", fmt.Errorf("greeting longer than %d bytes", max)
		}
	}
}

// Dial opens stream index to the agent at host per the offer.
func Dial(ctx context.Context, host string, o Offer, index int) (net.Conn, error) {
	return dial(ctx, host, o, index, "not the agent SSH started")
}

// DialSender opens stream index to the sender of a remote-to-remote move
// that listens at host (box1), from the agent (box2) that receives it, per
// the offer the control host passed on: the one direction open between
// the two hosts may be this one. The agent pins the sender's certificate
// as a sender pins an agent's: only the sender the control host started
// writes into DEST.
func DialSender(ctx context.Context, host string, o Offer, index int) (net.Conn, error) {
	return dial(ctx, host, o, index, "not the sender the control host started")
}

// dial opens stream index to host per the offer, saying why a
// certificate that is not the pinned one is refused.
func dial(ctx context.Context, host string, o Offer, index int, why string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(o.Port)))
	if err != nil {
		return nil, err
	}
	conn := c
	if o.Mode == TLS {
		want, err := hex.DecodeString(o.Fingerprint)
		if err != nil {
			c.Close()
			return nil, err
		}
		tc := tlsClient(c, &tls.Config{
			MinVersion:         tls.VersionTLS13,
			InsecureSkipVerify: true, // pinned instead, below
			VerifyConnection:   pinned(want, why),
		})
		tc.SetDeadline(time.Now().Add(15 * time.Second))
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS with %s: %w", host, err)
		}
		tc.SetDeadline(time.Time{})
		conn = tc
	}
	if _, err := fmt.Fprintf(conn, "BULKMOVE-STREAM %s %d\n", o.Token, index); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// selfSigned makes a throwaway ECDSA P-256 certificate and its SHA-256.
func selfSigned() (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "bulkmove agent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	sum := sha256.Sum256(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, hex.EncodeToString(sum[:]), nil
}

// pinned verifies a TLS peer by the SHA-256 of its certificate, compared
// in constant time with want; why says, in an error, what a certificate
// that differs means.
func pinned(want []byte, why string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no certificate")
		}
		got := sha256.Sum256(cs.PeerCertificates[0].Raw)
		if subtle.ConstantTimeCompare(got[:], want) != 1 {
			return fmt.Errorf("certificate SHA-256 %x, not the pinned %x (%s)", got, want, why)
		}
		return nil
	}
}
