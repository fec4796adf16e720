package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/buildinfo"
	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/wire"
)

// versionFlags is bulkmove version [--proto].
func versionFlags(fs *pflag.FlagSet) func(*call) int {
	proto := fs.Bool("proto", false, "print only the protocol version")
	return func(x *call) int {
		if len(x.args) > 0 {
			// The first word names the command, always, as in git.
			termsafe.Errorf(x.stderr, "version takes no operands; to move a directory named version, write ./version")
			return exitUsage
		}
		printVersion(x.stdout, *proto)
		return exitOK
	}
}

// printVersion writes the version line (version, protocol, revision, Go
// version, platform), or with proto the protocol's
// version alone.
func printVersion(w io.Writer, proto bool) {
	if proto {
		fmt.Fprintln(w, wire.Proto)
		return
	}
	// "bulkmove VERSION (protocol N," first: agentbin finds a remote
	// bulkmove of this version by that prefix.
	in := buildinfo.Get()
	fmt.Fprintf(w, "bulkmove %s (protocol %d, revision %s, %s, %s)\n", engine.Version, wire.Proto, in.Revision, in.GoVersion, in.Platform)
}
