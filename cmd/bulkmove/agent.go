package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/stream"
)

const agentUsage = `usage: bulkmove agent [--metrics-addr host:port] ROOT

Receives batches on standard input and answers on standard output, writing
under ROOT (created if missing). The sender starts it, locally or over SSH;
it is not meant to be run by hand.
`

func runAgent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentUsage) }
	metricsAddr := fs.String("metrics-addr", "", "export the receiver's Prometheus metrics on `host:port` (:0 picks a port and prints it)")
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
	if err := stream.ServeWith(ctx, stdin, stdout, fs.Arg(0), version, m.Set); err != nil {
		errorf(stderr, "%v", err)
		return exitFatal
	}
	return exitOK
}
