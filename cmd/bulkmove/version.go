package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/wire"
)

// runVersion is bulkmove version [--proto].
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	proto := fs.Bool("proto", false, "print only the protocol version")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *proto {
		fmt.Fprintln(stdout, wire.Proto)
		return exitOK
	}
	fmt.Fprintf(stdout, "bulkmove %s (protocol %d, %s, %s/%s)\n", engine.Version, wire.Proto, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
