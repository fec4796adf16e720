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
)

const agentUsage = `usage: bulkmove agent [--metrics-addr host:port] [--hub K] ROOT

Receives batches on standard input and answers on standard output, writing
under ROOT (created if missing). The sender starts it, locally or over SSH;
it is not meant to be run by hand.

With --hub K, it first prints "BULKMOVE-HUB SOCKET EXECUTABLE" and accepts
up to K-1 more streams of the same job on SOCKET, a Unix socket in a new
private directory, which the sender reaches through its other SSH
connections (forwarded, or relayed by "bulkmove join SOCKET"). All K
streams share one receiver.
`

func runAgent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentUsage) }
	metricsAddr := fs.String("metrics-addr", "", "export the receiver's Prometheus metrics on `host:port` (:0 picks a port and prints it)")
	hubStreams := fs.Int("hub", 0, "serve `K` streams: this one and K-1 joining on a Unix socket")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var m metrics.Receiver
	if *metricsAddr != "" {
		addr, err := metrics.Serve(ctx, *metricsAddr, m.Registry(version))
		if err != nil {
			errorf(stderr, "agent: %v", err)
			return exitUsage
		}
		errorf(stderr, "agent: metrics on http://%s/metrics", addr)
	}
	hub := &stream.Hub{Root: fs.Arg(0), Version: version, Opened: m.Set}
	var err error
	if *hubStreams >= 1 {
		err = serveHub(ctx, hub, *hubStreams, stdin, stdout)
	} else {
		err = hub.Serve(ctx, stdin, stdout)
	}
	if err != nil {
		errorf(stderr, "%v", err)
		return exitFatal
	}
	return exitOK
}

// serveHub serves stdin/stdout and up to k-1 streams joining on a Unix
// socket in a private directory (0700: only this user, or root, can
// connect). It returns when every stream has ended, with the first error.
func serveHub(ctx context.Context, hub *stream.Hub, k int, stdin io.Reader, stdout io.Writer) error {
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
	if _, err := fmt.Fprintf(stdout, "%s%s %s\n", hubBanner, sock, self); err != nil {
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
		}
	}
	g.Go(func() error {
		defer end()
		return hub.Serve(ctx, stdin, stdout)
	})
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		if open == 0 {
			mu.Unlock()
			c.Close()
			break
		}
		open++
		mu.Unlock()
		g.Go(func() error {
			defer end()
			defer c.Close()
			return hub.Serve(ctx, c, c)
		})
	}
	ln.Close()
	return g.Wait()
}
