package main

import (
	"io"
	"net"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/wire"
)

const hubUsage = `usage: bulkmove --send-hub [flags] SRC (started by a pulling bulkmove, not by hand)

The sending end of a pull: it walks SRC and serves the streams its puller
opens. It takes no flag of a move: the job's options come whole in --config.
`

// hubFlags registers the flags of bulkmove --send-hub --config CONFIG [--as
// NAME] [--dst-ids IDS] SRC: the sending end of a pull, started by the
// pulling bulkmove over SSH (engine's pull.go builds its command line),
// not by hand. It takes no flag of a move: the job's options come whole
// in --config.
func hubFlags(fs *pflag.FlagSet) func(*call) int {
	cfg := fs.String("config", "", "the job's options, as the pulling bulkmove gives them (engine.EncodeSenderConfig)")
	as := fs.String("as", "", "name of a single-file SRC at the receiver")
	dstIDs := fs.String("dst-ids", "", "the receiver's DEST by device and inode, with its machine (JSON): a SRC that overlaps it on this machine is refused")
	return func(x *call) int {
		if len(x.args) != 1 {
			termsafe.Errorf(x.stderr, "usage: bulkmove --send-hub [flags] SRC (started by a pulling bulkmove, not by hand)")
			return exitUsage
		}
		c, err := engine.DecodeSenderConfig(*cfg)
		if err == nil {
			err = c.Check()
		}
		if err != nil {
			termsafe.Errorf(x.stderr, "%s: %v", wire.CmdSendHub, err)
			return exitUsage
		}
		ctx, stop := signalContext()
		defer stop()
		limit, stopLimit := bwSignals()
		defer stopLimit()
		h := engine.Hub{Config: c, Src: x.args[0], As: *as, DstIDs: *dstIDs, Stdin: x.stdin, Stdout: x.stdout, Stderr: x.stderr, Limit: limit}
		return exitCode(h.Run(ctx))
	}
}

const joinUsage = `usage: bulkmove --join SOCKET (started by a pulling bulkmove, not by hand)

Relays a stream, standard input and output, to a hub's Unix SOCKET (an
agent's, or the sending end of a pull).
`

// joinFlags is `bulkmove --join SOCKET`: no flags.
func joinFlags(*pflag.FlagSet) func(*call) int {
	return func(x *call) int {
		if len(x.args) != 1 {
			termsafe.Errorf(x.stderr, "usage: bulkmove --join SOCKET (started by a pulling bulkmove, not by hand)")
			return exitUsage
		}
		return runJoin(x.args[0], x.stdin, x.stdout, x.stderr)
	}
}

// runJoin relays stdin and stdout to the hub at sock.
func runJoin(sock string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		termsafe.Errorf(stderr, "--join: %v", err)
		return exitFatal
	}
	defer c.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(c, stdin); c.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(stdout, c); done <- struct{}{} }()
	<-done
	return exitOK
}
