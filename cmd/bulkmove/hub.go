package main

import (
	"flag"
	"io"
	"net"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// runHub is bulkmove send-hub --config CONFIG [--as NAME] [--dst-ids IDS]
// SRC: the sending end of a pull, started by the pulling bulkmove over
// SSH, not by hand. It takes no flag of a move: the job's options come
// whole in --config.
func runHub(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove send-hub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := fs.String("config", "", "the job's options, as the pulling bulkmove gives them (engine.EncodeSenderConfig)")
	as := fs.String("as", "", "name of a single-file SRC at the receiver")
	dstIDs := fs.String("dst-ids", "", "the receiver's DEST by device and inode, with its machine (JSON): a SRC that overlaps it on this machine is refused")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		termsafe.Errorf(stderr, "usage: bulkmove send-hub [flags] SRC (started by a pulling bulkmove, not by hand)")
		return exitUsage
	}
	c, err := engine.DecodeSenderConfig(*cfg)
	if err == nil {
		err = c.Check()
	}
	if err != nil {
		termsafe.Errorf(stderr, "send-hub: %v", err)
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	limit, stopLimit := bwSignals()
	defer stopLimit()
	h := engine.Hub{Config: c, Src: fs.Arg(0), As: *as, DstIDs: *dstIDs, Stdin: stdin, Stdout: stdout, Stderr: stderr, Limit: limit}
	return exitCode(h.Run(ctx))
}

// runJoin is `bulkmove join SOCKET` (or send-join): relays a stream to a
// hub (an agent's, or the sending end of a pull).
func runJoin(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		termsafe.Errorf(stderr, "usage: bulkmove send-join SOCKET (started by a pulling bulkmove, not by hand)")
		return exitUsage
	}
	c, err := net.Dial("unix", args[0])
	if err != nil {
		termsafe.Errorf(stderr, "send-join: %v", err)
		return exitFatal
	}
	defer c.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(c, stdin); c.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(stdout, c); done <- struct{}{} }()
	<-done
	return exitOK
}
