// Package serve is the receiver as a daemon (`bulkmove serve`), for hosts
// where SSH is not the way in (appliances, Kubernetes): senders reach it
// over TLS 1.3 (transport/dataplane's greeting), each stream naming its
// job and its destination NAME/PATH beneath one of the server's roots, and
// the streams of one job share a receiver (package receive's hub over
// receive/extract). See docs/serve.md.
//
// It sits on the receiving side: it imports the receiver, the wire and the
// data plane, nothing of the sending side. cmd/bulkmove turns serve's
// flags into a Config (reading the token file and the TLS settings) and
// runs a Server on its listener.
//
// # What it trusts and refuses
//
// It trusts the operator's Config (roots, token, certificates, policy,
// limits), a sender that presents the token (or, with Mutual, a client
// certificate the TLS settings verify) as far as writing inside the root
// it names within the policy, and no one else:
//
//   - Before authentication a connection is a stranger's: the gate
//     (dataplane.Gate) bounds how many handshakes run at once, in all and
//     from one address, and slows and then locks out wrong tokens; a
//     handshake (TLS, greeting, Hello answered) must end within 15 s.
//   - A job writes only inside the directory its first stream opened
//     beneath its root (extract.OpenBeneath: made one directory at a
//     time, no symlink followed); a name that leaves the root, an unknown
//     root, or a later stream of the job naming another destination, is
//     refused, and told why.
//   - What a sender may ask to keep beyond data, names, modes and times
//     (owners, setid bits, extended attributes, ACLs) is Config.Allow's to
//     say, all off by default: a Hello that asks for more is refused, or,
//     for owners, not heeded.
//   - After authentication at most Limits.MaxConns streams and
//     Limits.MaxJobs jobs are served, all jobs' manifests share one memory
//     budget, and a stream that stalls with work in flight for
//     Limits.Stall is closed.
//
// No log line quotes a token or part of one.
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

// Config is what a server serves, to whom, and within what limits
// (serve's flags).
type Config struct {
	// Roots are the destination roots by name, each open for the
	// server's life (see OpenRoots): every job's destination is opened
	// beneath one, never by its path.
	Roots map[string]*os.File
	// Token is what a sender presents; with Mutual and no token, the
	// client certificate alone admits it.
	Token string
	// TLS are the server's TLS settings (dataplane.ServerConfig); Mutual
	// says they require a client certificate (--client-ca).
	TLS    *tls.Config
	Mutual bool
	Limits Limits
	// Allow is what senders may ask the receivers to keep (--allow-*):
	// the operator's to say, not the senders'.
	Allow wire.Allow
	// Version is this bulkmove's version, said in the handshake.
	Version string
	// Opened is called with each job's receiver, once opened (metrics).
	Opened func(*extract.Receiver)
	// Logf logs one line (a refused stream, a lockout).
	Logf func(format string, a ...any)
}

// Limits are a server's limits on its connections (see serve's flags).
type Limits struct {
	MaxHandshakes     int           // connections not yet authenticated at once
	MaxPeerHandshakes int           // the same from one address (IPv6: one /64)
	MaxConns          int           // authenticated streams at once
	MaxJobs           int           // jobs (sender runs) at once
	Stall             time.Duration // a stream stalled this long with work in flight is closed
}

// DefaultLimits are serve's limits by default. The stall timeout is the
// sender's own (--stall-timeout, 60 s) and more: a sender cuts a stalled
// stream and reconnects first.
var DefaultLimits = Limits{MaxHandshakes: 64, MaxPeerHandshakes: 32, MaxConns: 512, MaxJobs: 64, Stall: 5 * time.Minute}

// OpenRoots makes each root directory if missing and opens it, by name;
// on an error, those opened are closed again.
func OpenRoots(dirs map[string]string) (map[string]*os.File, error) {
	open := map[string]*os.File{}
	fail := func(name string, err error) (map[string]*os.File, error) {
		for _, r := range open {
			r.Close()
		}
		return nil, fmt.Errorf("root %s: %w", name, err)
	}
	for name, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fail(name, err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return fail(name, err)
		}
		if open[name], err = os.OpenFile(abs, os.O_RDONLY|syscall.O_DIRECTORY, 0); err != nil {
			delete(open, name)
			return fail(name, err)
		}
	}
	return open, nil
}

// Server is a running `bulkmove serve`: its jobs and their streams.
type Server struct {
	cfg    Config
	policy extract.Policy

	// Limits: gate on the handshakes before authentication, then at
	// most maxConns streams and maxJobs jobs; a stream stalled for stall
	// is closed.
	gate              *dataplane.Gate
	maxConns, maxJobs int
	stall             time.Duration
	// manifests bounds the memory of all jobs' manifests (each job's is
	// bounded by receive.DefaultManifestMemory too).
	manifests *receive.MemoryBudget

	mu    sync.Mutex
	jobs  map[string]*job
	conns int // authenticated streams
	wg    sync.WaitGroup
}

// manifestMemory bounds the memory of the manifests that all of
// serve's jobs hold at once: four jobs at their own limit (a job of the
// default batches holds a few MiB), within a container's 2 GiB.
const manifestMemory = 1 << 30

// New is a server of cfg; Serve runs it.
func New(cfg Config) *Server {
	l := cfg.Limits
	s := &Server{cfg: cfg, jobs: map[string]*job{},
		policy: extract.Policy{Owner: cfg.Allow.Owner, Setid: cfg.Allow.Setid, Xattrs: cfg.Allow.Xattrs, ACLs: cfg.Allow.ACLs, Devices: cfg.Allow.Devices,
			Hint: func(option string) string { return "serve --allow-" + option }},
		gate: dataplane.NewGate(l.MaxHandshakes, l.MaxPeerHandshakes), maxConns: l.MaxConns, maxJobs: l.MaxJobs, stall: l.Stall,
		manifests: &receive.MemoryBudget{Limit: manifestMemory}}
	s.gate.Locked = func(peer string, fails int, d time.Duration) {
		s.logf("serve: %s: %d wrong tokens: locked out for %s", peer, fails, d)
	}
	return s
}

func (s *Server) logf(format string, a ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, a...)
	}
}

// job is one sender job's receiver, shared by its streams.
type job struct {
	hub  *receive.Hub
	dest string   // NAME/PATH, as the job's first stream asked
	dir  *os.File // the destination, opened once beneath its root
	open int
}

// handshakeTimeout bounds a connection's time from accept to the end of
// its handshake (TLS, greeting, Hello answered): a peer that stalls
// anywhere in between holds nothing for long, nor a destination open.
var handshakeTimeout = 15 * time.Second

// Serve serves the connections ln accepts until it is closed (the
// caller closes it when ctx is done), and returns once every stream has
// ended.
func (s *Server) Serve(ctx context.Context, ln net.Listener) {
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
				s.logf("serve: %s: %v", c.RemoteAddr(), err)
			}
		}()
	}
}

// session serves one connection, admitted by the gate as peer: its
// handshake counts there until the greeting's token is checked. A
// failure before that is logged here, as the gate allows (see Gate.Log).
func (s *Server) session(ctx context.Context, raw net.Conn, peer string) (err error) {
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
				s.logf("serve: %s: %v", raw.RemoteAddr(), err)
			}
			err = nil
		}
		s.gate.Leave(peer)
	}()
	raw.SetDeadline(time.Now().Add(handshakeTimeout)) // lifted by the hub once the Hello is answered
	c := dataplane.Server(raw, s.cfg.TLS)
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
	if !s.cfg.Mutual && !dataplane.TokenOK(g.Token, s.cfg.Token) || s.cfg.Mutual && s.cfg.Token != "" && !dataplane.TokenOK(g.Token, s.cfg.Token) {
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
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns >= s.maxConns {
		return false
	}
	s.conns++
	return true
}

func (s *Server) exit() {
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
// the sender to show (see wire.Refuse). The sender's Hello, sent right
// after its greeting, is read and dropped (up to a bound) until the
// sender closes: a close with it unread would be a reset, which can reach
// the sender before the answer does.
func refuse(c *tls.Conn, err error) error {
	rerr := wire.Refuse(c, err)
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
func (s *Server) join(g dataplane.Greeting) (*job, error) {
	name, rest, _ := strings.Cut(g.Dest, "/")
	root, ok := s.cfg.Roots[name]
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
		j := &job{dest: g.Dest, dir: dir, open: 1, hub: &receive.Hub{
			Root: filepath.Join(root.Name(), rest), Version: s.cfg.Version, Opened: s.cfg.Opened, Policy: s.policy,
			Open:   func(o extract.Options) (*extract.Receiver, error) { return extract.OpenAt(dir, ".", o) },
			Shared: s.manifests,
		}}
		s.mu.Lock()
		if s.jobs[g.Job] == nil && len(s.jobs) < s.maxJobs {
			s.jobs[g.Job] = j
			s.mu.Unlock()
			return j, nil
		}
		s.mu.Unlock()
		dir.Close() // another stream of the job opened it first: join that (or the jobs filled up: refused above)
	}
}

func (s *Server) roomForJob() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs) < s.maxJobs
}

func (s *Server) busyJobs() error {
	return fmt.Errorf("busy: %d jobs running (serve --max-jobs)", s.maxJobs)
}

// joinOpen adds a stream to its job if the job is open (nil, nil if not).
func (s *Server) joinOpen(g dataplane.Greeting) (*job, error) {
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
func (s *Server) leave(id string, job *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if job.open--; job.open == 0 {
		if s.jobs[id] == job {
			delete(s.jobs, id)
		}
		job.dir.Close()
	}
}
