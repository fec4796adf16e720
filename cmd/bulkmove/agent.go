package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/stream/dataplane"
)

const agentUsage = `usage: bulkmove agent [--metrics-addr host:port] [--hub K] ROOT

Receives batches on standard input and answers on standard output, writing
under ROOT (created if missing). The sender starts it, locally or over SSH;
it is not meant to be run by hand.

With --hub K, it first prints "BULKMOVE-HUB SOCKET EXECUTABLE [OFFER]" and accepts
up to K-1 more streams of the same job on SOCKET, a Unix socket in a new
private directory, which the sender reaches through its other SSH
connections (forwarded, or relayed by "bulkmove join SOCKET"). All K
streams share one receiver. With --data tls (or tcp) it also listens on a
port of --data-ports for K streams, each presenting the one-time token of
OFFER ("data=MODE:PORT:CERT-SHA256:TOKEN"); stdin is then only held open
by the sender until it is done.

--io-nice (the idle I/O class) and --nice N lower its claim on the disks
and the CPUs, as the sender's flags of the same names ask.
`

func runAgent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentUsage) }
	metricsAddr := fs.String("metrics-addr", "", "export the receiver's Prometheus metrics on `host:port` (:0 picks a port and prints it)")
	hubStreams := fs.Int("hub", 0, "serve `K` streams: this one and K-1 joining on a Unix socket")
	data := fs.String("data", "", "with --hub: also take the K streams over `tls` or tcp, on a port of --data-ports")
	dataPorts := fs.String("data-ports", "", "port `range` for --data, e.g. 50000-50100 (default: any free port)")
	var nice niceFlags
	nice.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	nice.apply(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var m metrics.Receiver
	if err := serveReceiverMetrics(ctx, &m, *metricsAddr, "agent", stderr); err != nil {
		return exitUsage
	}
	hub := &stream.Hub{Root: fs.Arg(0), Version: version, Opened: m.Set}
	var dp *dataplane.Listener
	if *data != "" {
		if *hubStreams < 1 || *data != string(dataplane.TLS) && *data != string(dataplane.TCP) {
			errorf(stderr, "agent: --data %q: want tls or tcp, with --hub", *data)
			return exitUsage
		}
		var err error
		if dp, err = dataplane.Listen(dataplane.Mode(*data), *dataPorts, *hubStreams); err != nil {
			errorf(stderr, "agent: %v", err)
			return exitFatal
		}
	}
	var err error
	if *hubStreams >= 1 {
		err = serveHub(ctx, hub, *hubStreams, dp, stdin, stdout)
	} else {
		err = hub.Serve(ctx, stdin, stdout)
	}
	if err != nil {
		errorf(stderr, "%v", err)
		return exitFatal
	}
	return exitOK
}

// serveHub serves stdin/stdout and streams joining on a Unix socket in a
// private directory (0700: only this user, or root, can connect), and,
// with a data plane (dp not nil), up to k streams over TCP or TLS, each
// presenting the one-time token. With a data plane stdin is not a stream:
// its end (the sender is done, or gone) stops new joins. It returns when
// every stream has ended, with the first error.
func serveHub(ctx context.Context, hub *stream.Hub, k int, dp *dataplane.Listener, stdin io.Reader, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "bulkmove-agent-")
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "hub.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer ln.Close()
	self, err := os.Executable()
	if err != nil {
		self = "bulkmove"
	}
	banner := fmt.Sprintf("%s%s %s", hubBanner, sock, self)
	if dp != nil {
		defer dp.Close()
		banner += " " + dp.Offer().String()
	}
	if _, err := fmt.Fprintln(stdout, banner); err != nil {
		return err
	}
	// Streams end independently: one lost connection does not end the
	// others, whose sender goes on without it, or joins again (a stream
	// that reconnects). The hub takes joins as long as a stream is open,
	// however many; when the last one ends, so does the agent.
	var g errgroup.Group
	var mu sync.Mutex
	open := 1
	end := func() {
		mu.Lock()
		defer mu.Unlock()
		if open--; open == 0 {
			ln.Close()
			if dp != nil {
				dp.Close()
			}
		}
	}
	serve := func(c io.ReadWriteCloser) bool {
		mu.Lock()
		if open == 0 {
			mu.Unlock()
			c.Close()
			return false
		}
		open++
		mu.Unlock()
		g.Go(func() error {
			defer end()
			defer c.Close()
			return hub.Serve(ctx, c, c)
		})
		return true
	}
	g.Go(func() error {
		defer end()
		if dp != nil {
			_, err := io.Copy(io.Discard, stdin) // held open by the sender until it is done
			return err
		}
		return hub.Serve(ctx, stdin, stdout)
	})
	if dp != nil {
		go func() {
			for {
				c, _, err := dp.Accept()
				if err != nil || !serve(c) {
					return
				}
			}
		}()
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil || !serve(c) {
			break
		}
	}
	ln.Close()
	return g.Wait()
}

// serveReceiverMetrics exports a receiver's metrics on addr (if set),
// saying where on stderr; who names the command in messages.
func serveReceiverMetrics(ctx context.Context, m *metrics.Receiver, addr, who string, stderr io.Writer) error {
	if addr == "" {
		return nil
	}
	at, err := metrics.Serve(ctx, addr, m.Registry(version))
	if err != nil {
		errorf(stderr, "%s: %v", who, err)
		return err
	}
	errorf(stderr, "%s: metrics on http://%s/metrics", who, at)
	return nil
}
