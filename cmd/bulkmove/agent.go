package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/bulkmove/bulkmove/stream"
)

const agentUsage = `usage: bulkmove agent ROOT

Receives batches on standard input and answers on standard output, writing
under ROOT (created if missing). The sender starts it, locally or over SSH;
it is not meant to be run by hand.
`

func runAgent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentUsage) }
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := stream.Serve(ctx, stdin, stdout, fs.Arg(0), version); err != nil {
		errorf(stderr, "%v", err)
		return exitFatal
	}
	return exitOK
}
