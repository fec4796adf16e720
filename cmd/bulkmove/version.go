package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/wire"
)

// versionFlags is bulkmove version [--proto].
func versionFlags(fs *pflag.FlagSet) func(*call) int {
	proto := fs.Bool("proto", false, "print only the protocol version")
	return func(x *call) int {
		printVersion(x.stdout, *proto)
		return exitOK
	}
}

// printVersion writes the version line, or with proto the protocol's
// version alone.
func printVersion(w io.Writer, proto bool) {
	if proto {
		fmt.Fprintln(w, wire.Proto)
		return
	}
	fmt.Fprintf(w, "bulkmove %s (protocol %d, %s, %s/%s)\n", engine.Version, wire.Proto, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
