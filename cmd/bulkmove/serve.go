package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/transport/dataplane"
)

const serveUsage = `usage: bulkmove serve --listen ADDR --root NAME=DIR [--root ...] (--token-file FILE | --client-ca FILE) [flags]

Runs the receiver as a daemon, for hosts where SSH is not the way in
(appliances, Kubernetes). Senders reach it as

  bulkmove [flags] --token-file FILE --fingerprint SHA256 SRC bulkmove://HOST:PORT/NAME/PATH

over TLS 1.3: each stream says the shared token (or presents a client
certificate signed by --client-ca), its job and the destination, NAME/PATH,
which must stay inside the root called NAME: it is made and opened beneath
the root with no symlink followed. The streams of one job share a receiver.
A refused stream is told why, and its sender stops. Without --tls-cert, a throwaway certificate is made and its
SHA-256 printed, for senders to pin with --fingerprint.

The token file must be closed to others (0600, or 0640/0440 for a group)
and hold a random token (openssl rand -hex 24), not a placeholder. Wrong
tokens are slowed, and lock their address out after 10 in a row; the
limits below bound what strangers and senders can hold (docs/serve.md).

What a sender may ask the receiver to keep beyond data, names, modes and
times is this side's to allow, each off by default: owners (--allow-owner;
as root or with CAP_CHOWN), setuid/setgid bits and file capabilities
(--allow-setid), extended attributes (--allow-xattrs) and ACLs
(--allow-acls). A job that asks for setid bits, attributes or ACLs not
allowed is refused, saying which flag allows them; one asking for owners
not allowed goes on, its files owned by the serving user, and its sender
warns.

Flags:
`

// stringMap is a repeatable NAME=VALUE flag.
type stringMap map[string]string

func (m stringMap) String() string { return fmt.Sprint(map[string]string(m)) }
func (m stringMap) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" || strings.Contains(k, "/") {
		return fmt.Errorf("want NAME=DIR, got %q", s)
	}
	m[k] = v
	return nil
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	listen := fs.String("listen", ":7000", "listen on `host:port`")
	roots := stringMap{}
	fs.Var(roots, "root", "a destination root, `NAME=DIR` (repeatable)")
	tokenFile := fs.String("token-file", "", "senders must present the token in `FILE`")
	certFile := fs.String("tls-cert", "", "TLS certificate `file` (PEM)")
	keyFile := fs.String("tls-key", "", "TLS key `file` (PEM)")
	clientCA := fs.String("client-ca", "", "require client certificates signed by the CA in `file` (mutual TLS)")
	metricsAddr := fs.String("metrics-addr", "", "export the receivers' Prometheus metrics on `host:port`")
	maxHandshakes := fs.Int("max-handshakes", defaultServe.maxHandshakes, "connections not yet authenticated at once, `N` in all; more are closed at once")
	maxPeerHandshakes := fs.Int("max-peer-handshakes", defaultServe.maxPeerHandshakes, "connections not yet authenticated at once from one address (IPv6: one /64), `N`")
	maxConns := fs.Int("max-conns", defaultServe.maxConns, "authenticated streams at once, `N`; more are refused")
	maxJobs := fs.Int("max-jobs", defaultServe.maxJobs, "jobs (sender runs) at once, `N`; more are refused")
	stall := fs.Duration("stall-timeout", defaultServe.stall, "a stream that sends no byte for `duration` with work in flight (a batch begun), or takes none, is closed")
	var allow allowFlags
	allow.register(fs)
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return exitUsage
	}
	if *maxHandshakes < 1 || *maxPeerHandshakes < 1 || *maxConns < 1 || *maxJobs < 1 || *stall <= 0 {
		errorf(stderr, "serve: --max-handshakes, --max-peer-handshakes, --max-conns, --max-jobs and --stall-timeout must be positive")
		return exitUsage
	}
	if len(roots) == 0 {
		errorf(stderr, "serve: at least one --root NAME=DIR")
		return exitUsage
	}
	if *tokenFile == "" && *clientCA == "" {
		errorf(stderr, "serve: --token-file or --client-ca: the server takes no anonymous senders")
		return exitUsage
	}
	var token string
	if *tokenFile != "" {
		var err error
		if token, err = dataplane.ReadToken(*tokenFile); err != nil {
			errorf(stderr, "serve: %v", err)
			return exitUsage
		}
	}
	// Each root is opened once: every job's destination is then opened
	// beneath it, never by its path.
	open := map[string]*os.File{}
	defer func() {
		for _, r := range open {
			r.Close()
		}
	}()
	for name, dir := range roots {
		abs, err := filepath.Abs(dir)
		if err != nil {
			errorf(stderr, "serve: root %s: %v", name, err)
			return exitUsage
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			errorf(stderr, "serve: root %s: %v", name, err)
			return exitFatal
		}
		if open[name], err = os.OpenFile(abs, os.O_RDONLY|syscall.O_DIRECTORY, 0); err != nil {
			errorf(stderr, "serve: root %s: %v", name, err)
			return exitFatal
		}
	}
	cfg, fp, err := dataplane.ServerConfig(*certFile, *keyFile, *clientCA)
	if err != nil {
		errorf(stderr, "serve: %v", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var m metrics.Receiver
	if err := serveReceiverMetrics(ctx, &m, *metricsAddr, "serve", stderr); err != nil {
		return exitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		errorf(stderr, "serve: %v", err)
		return exitFatal
	}
	errorf(stderr, "serve: listening on %s, certificate SHA-256 %s", ln.Addr(), fp)
	s := newServer(open, token, cfg, stderr, serveLimits{*maxHandshakes, *maxPeerHandshakes, *maxConns, *maxJobs, *stall})
	s.mutual, s.opened = *clientCA != "", exportReceiver(&m)
	s.policy = allow.policy(flagHint("serve "))
	context.AfterFunc(ctx, func() { ln.Close() })
	s.run(ctx, ln)
	return exitOK
}

// server is `bulkmove serve`.
type server struct {
	roots  map[string]*os.File // by name, open for the server's life
	token  string
	mutual bool
	cfg    *tls.Config
	opened func(*extract.Receiver)
	log    io.Writer
	// policy is what senders may ask the receivers to keep (--allow-*):
	// the operator's to say, not the senders'.
	policy extract.Policy

	// Limits: gate on the handshakes before authentication, then at
	// most maxConns streams and maxJobs jobs; a stream stalled for stall
	// is closed.
	gate              *dataplane.Gate
	maxConns, maxJobs int
	stall             time.Duration
	// manifests bounds the memory of all jobs' manifests (each job's is
	// bounded by stream.DefaultManifestMemory too).
	manifests *stream.MemoryBudget

	mu    sync.Mutex
	jobs  map[string]*serveJob
	conns int // authenticated streams
	wg    sync.WaitGroup
}

// serveLimits are serve's limits on its connections (see the flags).
type serveLimits struct {
	maxHandshakes, maxPeerHandshakes, maxConns, maxJobs int
	stall                                               time.Duration
}

// serveManifestMemory bounds the memory of the manifests that all of
// serve's jobs hold at once: four jobs at their own limit (a job of the
// default batches holds a few MiB), within a container's 2 GiB.
const serveManifestMemory = 1 << 30

// defaultServe are serve's limits by default. The stall timeout is the
// sender's own (--stall-timeout, 60 s) and more: a sender cuts a stalled
// stream and reconnects first.
var defaultServe = serveLimits{maxHandshakes: 64, maxPeerHandshakes: 32, maxConns: 512, maxJobs: 64, stall: 5 * time.Minute}

// newServer is a server of the given roots, taking token (if not empty),
// logging to log.
func newServer(roots map[string]*os.File, token string, cfg *tls.Config, log io.Writer, l serveLimits) *server {
	s := &server{roots: roots, token: token, cfg: cfg, log: log, jobs: map[string]*serveJob{},
		gate: dataplane.NewGate(l.maxHandshakes, l.maxPeerHandshakes), maxConns: l.maxConns, maxJobs: l.maxJobs, stall: l.stall,
		manifests: &stream.MemoryBudget{Limit: serveManifestMemory}}
	s.gate.Locked = func(peer string, fails int, d time.Duration) {
		errorf(log, "serve: %s: %d wrong tokens: locked out for %s", peer, fails, d)
	}
	return s
}

// serveJob is one sender job's receiver, shared by its streams.
type serveJob struct {
	hub  *stream.Hub
	dest string   // NAME/PATH, as the job's first stream asked
	dir  *os.File // the destination, opened once beneath its root
	open int
}

// handshakeTimeout bounds a connection's time from accept to the end of
// its handshake (TLS, greeting, Hello answered): a peer that stalls
// anywhere in between holds nothing for long, nor a destination open.
var handshakeTimeout = 15 * time.Second

func (s *server) run(ctx context.Context, ln net.Listener) {
	defer s.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		// Over the gate's limits (or locked out), closed at once: no
		// goroutine, no TLS, nothing read.
		peer, err := s.gate.Enter(c.RemoteAddr())
		if err != nil {
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if err := s.session(ctx, c, peer); err != nil {
				errorf(s.log, "serve: %s: %v", c.RemoteAddr(), err)
			}
		}()
	}
}

// session serves one connection, admitted by the gate as peer: its
// handshake counts there until the greeting's token is checked. A
// failure before that is logged here, as the gate allows (see Gate.Log).
func (s *server) session(ctx context.Context, raw net.Conn, peer string) (err error) {
	authing := true
	defer func() {
		if !authing {
			return
		}
		if err != nil {
			if ok, unlogged := s.gate.Log(peer); ok {
				if unlogged > 0 {
					err = fmt.Errorf("%w (and %d more failed handshakes from %s not logged)", err, unlogged, peer)
				}
				errorf(s.log, "serve: %s: %v", raw.RemoteAddr(), err)
			}
			err = nil
		}
		s.gate.Leave(peer)
	}()
	raw.SetDeadline(time.Now().Add(handshakeTimeout)) // lifted by the hub once the Hello is answered
	c := tls.Server(raw, s.cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return err
	}
	g, err := dataplane.ReadGreeting(c)
	if err != nil {
		var ne net.Error
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
			return err // gone, or silent: no one to tell
		}
		return refuse(c, err)
	}
	if !s.mutual && !dataplane.TokenOK(g.Token, s.token) || s.mutual && s.token != "" && !dataplane.TokenOK(g.Token, s.token) {
		s.gate.Failed(ctx, peer) // its delay, the peer's slot still held
		return refuse(c, errors.New("wrong token"))
	}
	s.gate.Succeeded(peer)
	s.gate.Leave(peer)
	authing = false
	if !s.enter() {
		return refuse(c, fmt.Errorf("busy: %d streams open (serve --max-conns)", s.maxConns))
	}
	job, err := s.join(g)
	if err != nil {
		// Counted out before the sender reads why: it may open its next
		// stream at once, and must not find this one still counted.
		s.exit()
		return refuse(c, err)
	}
	defer s.exit()
	defer s.leave(g.Job, job)
	sc := &stallConn{Conn: c, stall: s.stall}
	return job.hub.Serve(ctx, sc, sc)
}

// enter counts an authenticated stream, if there is room for it.
func (s *server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns >= s.maxConns {
		return false
	}
	s.conns++
	return true
}

func (s *server) exit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns--
}

// stallConn is a stream after its handshake. A read that waits stall for
// its sender with work in flight (the hub says so, see InFlight; or a
// frame begun), or a write that waits stall for the sender to take it,
// fails: a sender that stopped mid-batch holds its stream and its job's
// receiver no longer. Between batches a read waits as long as the job
// runs (a stream with nothing to do until the job's last file lands).
// Until the hub lifts the handshake's deadline (SetDeadline with the zero
// time), that deadline alone holds.
type stallConn struct {
	*tls.Conn
	stall    time.Duration
	lifted   atomic.Bool
	inFlight atomic.Bool
	// When each direction's deadline was last pushed (0: not set): it is
	// pushed again only once a slack has passed, not on every record.
	readSet, writeSet atomic.Int64
}

func (c *stallConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.lifted.Store(true)
	}
	return c.Conn.SetDeadline(t)
}

// InFlight says whether the session waits with work in flight.
func (c *stallConn) InFlight(busy bool) { c.inFlight.Store(busy) }

func (c *stallConn) Read(p []byte) (int, error) {
	if c.lifted.Load() {
		if c.inFlight.Load() {
			c.push(&c.readSet, c.Conn.SetReadDeadline)
		} else if c.readSet.Load() != 0 {
			c.readSet.Store(0)
			c.Conn.SetReadDeadline(time.Time{})
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.inFlight.Store(true) // a frame begun: the rest of it is work in flight
	}
	return n, err
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.lifted.Load() {
		c.push(&c.writeSet, c.Conn.SetWriteDeadline)
	}
	return c.Conn.Write(p)
}

// push sets a direction's deadline stall from now, if it was set more
// than a slack (an eighth of stall, at most a second) ago: a wait then
// fails after between stall less the slack and stall.
func (c *stallConn) push(last *atomic.Int64, set func(time.Time) error) {
	now := time.Now()
	if now.UnixNano()-last.Load() < int64(min(c.stall/8, time.Second)) {
		return
	}
	last.Store(now.UnixNano())
	set(now.Add(c.stall))
}

// refuse answers a stream's greeting with the reason it is refused, for
// the sender to show (see stream.Refuse). The sender's Hello, sent right
// after its greeting, is read and dropped (up to a bound) until the
// sender closes: a close with it unread would be a reset, which can reach
// the sender before the answer does.
func refuse(c *tls.Conn, err error) error {
	rerr := stream.Refuse(c, err)
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.CopyN(io.Discard, c, 1<<20)
	return rerr
}

// join adds a stream to its job, opening the job's destination if it is
// the first: NAME[/PATH] beneath the root NAME, made if missing, with no
// symlink followed (extract.OpenBeneath). The job's receiver is then
// opened in that directory, whatever its path comes to name (a symlink
// another job planted there, a directory swapped by a local user).
func (s *server) join(g dataplane.Greeting) (*serveJob, error) {
	name, rest, _ := strings.Cut(g.Dest, "/")
	root, ok := s.roots[name]
	if !ok {
		return nil, fmt.Errorf("no root named %q", name)
	}
	if rest != "" && !filepath.IsLocal(rest) {
		return nil, fmt.Errorf("%q leaves the root %s", g.Dest, name)
	}
	for {
		if job, err := s.joinOpen(g); job != nil || err != nil {
			return job, err
		}
		if !s.roomForJob() {
			return nil, s.busyJobs()
		}
		dir, err := extract.OpenBeneath(root, rest)
		if err != nil {
			return nil, fmt.Errorf("%s/%w", name, err)
		}
		job := &serveJob{dest: g.Dest, dir: dir, open: 1, hub: &stream.Hub{
			Root: filepath.Join(root.Name(), rest), Version: version, Opened: s.opened, Policy: s.policy,
			Open:   func(o extract.Options) (*extract.Receiver, error) { return extract.OpenAt(dir, ".", o) },
			Shared: s.manifests,
		}}
		s.mu.Lock()
		if s.jobs[g.Job] == nil && len(s.jobs) < s.maxJobs {
			s.jobs[g.Job] = job
			s.mu.Unlock()
			return job, nil
		}
		s.mu.Unlock()
		dir.Close() // another stream of the job opened it first: join that (or the jobs filled up: refused above)
	}
}

func (s *server) roomForJob() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs) < s.maxJobs
}

func (s *server) busyJobs() error {
	return fmt.Errorf("busy: %d jobs running (serve --max-jobs)", s.maxJobs)
}

// joinOpen adds a stream to its job if the job is open (nil, nil if not).
func (s *server) joinOpen(g dataplane.Greeting) (*serveJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	job := s.jobs[g.Job]
	if job == nil {
		return nil, nil
	}
	if job.dest != g.Dest {
		return nil, fmt.Errorf("job %s: stream %d asks for %s, the job writes to %s", g.Job, g.Index, g.Dest, job.dest)
	}
	job.open++
	return job, nil
}

// leave ends a stream of job; the job ends with its last.
func (s *server) leave(id string, job *serveJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if job.open--; job.open == 0 {
		if s.jobs[id] == job {
			delete(s.jobs, id)
		}
		job.dir.Close()
	}
}
