package main

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/receive/serve"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
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
(--allow-setid), extended attributes (--allow-xattrs), ACLs
(--allow-acls) and devices (--allow-devices, -D; as root). A job that
asks for setid bits, attributes, ACLs or devices not allowed is refused,
saying which flag allows them; one asking for owners not allowed goes
on, its files owned by the serving user, and its sender warns. FIFOs and
sockets (-D) any serve makes.
`

// stringMap is a repeatable NAME=VALUE flag.
type stringMap map[string]string

func (m stringMap) String() string { return fmt.Sprint(map[string]string(m)) }
func (m stringMap) Type() string   { return "NAME=DIR" }

func (m stringMap) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" || strings.Contains(k, "/") {
		return fmt.Errorf("want NAME=DIR, got %q", s)
	}
	m[k] = v
	return nil
}

// serveOptions are bulkmove serve's flags.
type serveOptions struct {
	listen, tokenFile, certFile, keyFile, clientCA, metricsAddr string

	roots  stringMap
	limits serve.Limits
	allow  engine.AllowFlags
}

// serveFlags registers the flags of `bulkmove serve` and returns its run.
func serveFlags(fs *pflag.FlagSet) func(*call) int {
	o := &serveOptions{roots: stringMap{}, limits: serve.DefaultLimits}
	fs.StringVar(&o.listen, "listen", ":7000", "listen on `host:port`")
	fs.Var(o.roots, "root", "a destination root, `NAME=DIR` (repeatable)")
	fs.StringVar(&o.tokenFile, "token-file", "", "senders must present the token in `FILE`")
	fs.StringVar(&o.certFile, "tls-cert", "", "TLS certificate `file` (PEM)")
	fs.StringVar(&o.keyFile, "tls-key", "", "TLS key `file` (PEM)")
	fs.StringVar(&o.clientCA, "client-ca", "", "require client certificates signed by the CA in `file` (mutual TLS)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "export the receivers' Prometheus metrics on `host:port`")
	l := &o.limits
	fs.IntVar(&l.MaxHandshakes, "max-handshakes", l.MaxHandshakes, "connections not yet authenticated at once, `N` in all; more are closed at once")
	fs.IntVar(&l.MaxPeerHandshakes, "max-peer-handshakes", l.MaxPeerHandshakes, "connections not yet authenticated at once from one address (IPv6: one /64), `N`")
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "authenticated streams at once, `N`; more are refused")
	fs.IntVar(&l.MaxJobs, "max-jobs", l.MaxJobs, "jobs (sender runs) at once, `N`; more are refused")
	fs.DurationVar(&l.Stall, "stall-timeout", l.Stall, "a stream that sends no byte for `duration` with work in flight (a batch begun), or takes none, is closed")
	registerAllow(fs, &o.allow)
	return func(x *call) int {
		if len(x.args) != 0 {
			return exitUsage
		}
		return runServe(x, o)
	}
}

// runServe is `bulkmove serve`: its flags into a serve.Config, and a
// serve.Server on its listener until SIGINT or SIGTERM.
func runServe(x *call, o *serveOptions) int {
	stderr := x.stderr
	l, roots := o.limits, o.roots
	if l.MaxHandshakes < 1 || l.MaxPeerHandshakes < 1 || l.MaxConns < 1 || l.MaxJobs < 1 || l.Stall <= 0 {
		termsafe.Errorf(stderr, "serve: --max-handshakes, --max-peer-handshakes, --max-conns, --max-jobs and --stall-timeout must be positive")
		return exitUsage
	}
	if len(roots) == 0 {
		termsafe.Errorf(stderr, "serve: at least one --root NAME=DIR")
		return exitUsage
	}
	if o.tokenFile == "" && o.clientCA == "" {
		termsafe.Errorf(stderr, "serve: --token-file or --client-ca: the server takes no anonymous senders")
		return exitUsage
	}
	var token string
	if o.tokenFile != "" {
		var err error
		if token, err = dataplane.ReadToken(o.tokenFile); err != nil {
			termsafe.Errorf(stderr, "serve: %v", err)
			return exitUsage
		}
	}
	// Each root is opened once: every job's destination is then opened
	// beneath it, never by its path.
	open, err := serve.OpenRoots(roots)
	if err != nil {
		termsafe.Errorf(stderr, "serve: %v", err)
		return exitFatal
	}
	defer func() {
		for _, r := range open {
			r.Close()
		}
	}()
	cfg, fp, err := dataplane.ServerConfig(o.certFile, o.keyFile, o.clientCA)
	if err != nil {
		termsafe.Errorf(stderr, "serve: %v", err)
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	var m metrics.Receiver
	if err := serveReceiverMetrics(ctx, &m, o.metricsAddr, "serve", stderr); err != nil {
		return exitUsage
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		termsafe.Errorf(stderr, "serve: %v", err)
		return exitFatal
	}
	termsafe.Errorf(stderr, "serve: listening on %s, certificate SHA-256 %s", ln.Addr(), fp)
	s := serve.New(serve.Config{Roots: open, Token: token, TLS: cfg, Mutual: o.clientCA != "", Limits: l,
		Allow: wire.Allow(o.allow), Version: engine.Version, Opened: engine.ExportReceiver(&m),
		Logf: func(format string, a ...any) { termsafe.Errorf(stderr, format, a...) }})
	context.AfterFunc(ctx, func() { ln.Close() })
	s.Serve(ctx, ln)
	return exitOK
}
