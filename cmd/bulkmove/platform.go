package main

import (
	"fmt"
	"strings"

	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// needsLinux refuses, before anything starts, what would receive on a
// system whose receiver does not build for real (extract.Supported): the
// sending side (walk, read, the SSH and TLS clients) runs on macOS and
// FreeBSD, the receiving side on Linux only. Receiving is serve, the
// agent, and a move or verify whose DEST is on this host.
func needsLinux(command string, args []string) error {
	return refuseReceiving(extract.Supported(), command, args)
}

// refuseReceiving is needsLinux where the receiver's Supported said
// unsupported (nil: it is).
func refuseReceiving(unsupported error, command string, args []string) error {
	if unsupported == nil {
		return nil
	}
	switch command {
	case "serve", wire.CmdAgent:
		return fmt.Errorf("%s: %w", command, unsupported)
	case "", "verify":
		if len(args) < 2 {
			return nil // the command says what is missing
		}
		dst := args[len(args)-1]
		if _, remote, err := sshx.ParseTarget(dst); err == nil && !remote && !strings.HasPrefix(dst, "bulkmove://") {
			return fmt.Errorf("destination %s is on this host: %w (push to a Linux host over SSH or to its bulkmove serve)", dst, unsupported)
		}
	}
	return nil
}
