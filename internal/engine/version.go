package engine

import (
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/bulkmove/bulkmove/wire"
)

// version is this build's version; the agent cache on remote hosts is keyed by it.
var Version = "0.1.0-dev"

// Exit codes, documented in --help and README.md.
const (
	ExitOK          = 0   // everything moved
	ExitUsage       = 1   // bad command line
	ExitPartial     = 2   // some entries failed; they were listed on stderr
	ExitFatal       = 3   // the job could not be attempted or not completed
	ExitMaxDelete   = 25  // --max-delete stopped the deletions (as rsync's)
	ExitInterrupted = 130 // stopped by a signal
)

func RunVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	proto := fs.Bool("proto", false, "print only the protocol version")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *proto {
		fmt.Fprintln(stdout, wire.Proto)
		return ExitOK
	}
	fmt.Fprintf(stdout, "bulkmove %s (protocol %d, %s, %s/%s)\n", Version, wire.Proto, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return ExitOK
}
