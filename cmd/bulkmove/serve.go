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
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/dataplane"
	"github.com/bulkmove/bulkmove/stream/extract"
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
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
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
	s := &server{roots: open, token: token, mutual: *clientCA != "", cfg: cfg, opened: m.Set, log: stderr, jobs: map[string]*serveJob{}}
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

	mu   sync.Mutex
	jobs map[string]*serveJob
	wg   sync.WaitGroup
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
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if err := s.session(ctx, c); err != nil {
				errorf(s.log, "serve: %s: %v", c.RemoteAddr(), err)
			}
		}()
	}
}

func (s *server) session(ctx context.Context, raw net.Conn) error {
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
		return refuse(c, errors.New("wrong token"))
	}
	job, err := s.join(g)
	if err != nil {
		return refuse(c, err)
	}
	defer s.leave(g.Job, job)
	return job.hub.Serve(ctx, c, c)
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
		dir, err := extract.OpenBeneath(root, rest)
		if err != nil {
			return nil, fmt.Errorf("%s/%w", name, err)
		}
		job := &serveJob{dest: g.Dest, dir: dir, open: 1, hub: &stream.Hub{
			Root: filepath.Join(root.Name(), rest), Version: version, Opened: s.opened,
			Open: func(o extract.Options) (*extract.Receiver, error) { return extract.OpenAt(dir, ".", o) },
		}}
		s.mu.Lock()
		if s.jobs[g.Job] == nil {
			s.jobs[g.Job] = job
			s.mu.Unlock()
			return job, nil
		}
		s.mu.Unlock()
		dir.Close() // another stream of the job opened it first: join that
	}
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
