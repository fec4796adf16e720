package main

import (
	"context"
	"crypto/tls"
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
which must stay inside the root called NAME. The streams of one job share
a receiver. Without --tls-cert, a throwaway certificate is made and its
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
		roots[name] = abs
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
	s := &server{roots: roots, token: token, mutual: *clientCA != "", cfg: cfg, opened: m.Set, log: stderr, jobs: map[string]*serveJob{}}
	context.AfterFunc(ctx, func() { ln.Close() })
	s.run(ctx, ln)
	return exitOK
}

// server is `bulkmove serve`.
type server struct {
	roots  map[string]string
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
	dest string
	open int
}

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
	raw.SetDeadline(time.Now().Add(15 * time.Second))
	c := tls.Server(raw, s.cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return err
	}
	g, err := dataplane.ReadGreeting(c)
	if err != nil {
		return err
	}
	if !s.mutual && !dataplane.TokenOK(g.Token, s.token) {
		return fmt.Errorf("wrong token")
	}
	if s.mutual && s.token != "" && !dataplane.TokenOK(g.Token, s.token) {
		return fmt.Errorf("wrong token")
	}
	raw.SetDeadline(time.Time{})
	dir, err := s.resolve(g.Dest)
	if err != nil {
		return err
	}
	s.mu.Lock()
	job := s.jobs[g.Job]
	if job == nil {
		job = &serveJob{hub: &stream.Hub{Root: dir, Version: version, Opened: s.opened}, dest: dir}
		s.jobs[g.Job] = job
	}
	if job.dest != dir {
		s.mu.Unlock()
		return fmt.Errorf("job %s: stream %d asks for %s, the job writes to %s", g.Job, g.Index, g.Dest, job.dest)
	}
	job.open++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if job.open--; job.open == 0 {
			delete(s.jobs, g.Job)
		}
		s.mu.Unlock()
	}()
	return job.hub.Serve(ctx, c, c)
}

// resolve maps NAME[/PATH] to a directory inside the root NAME.
func (s *server) resolve(dest string) (string, error) {
	name, rest, _ := strings.Cut(dest, "/")
	root, ok := s.roots[name]
	if !ok {
		return "", fmt.Errorf("no root named %q", name)
	}
	if rest == "" {
		return root, nil
	}
	if !filepath.IsLocal(rest) {
		return "", fmt.Errorf("%q leaves the root %s", dest, name)
	}
	// Create the path through an os.Root, which refuses a symlink that
	// leads out of the root (an earlier job may have sent one), then make
	// sure what the path names now is inside the root.
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if err := r.MkdirAll(rest, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", dest, err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rest))
	if err != nil {
		return "", err
	}
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(rootReal, real); err != nil || !(rel == "." || filepath.IsLocal(rel)) {
		return "", fmt.Errorf("%q leads out of the root %s", dest, name)
	}
	return real, nil
}
