// Command bulkmove moves huge trees of small files between directories and
// hosts over K parallel streams. main parses the command line and maps
// outcomes to exit codes; the move itself is package internal/engine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/receive/extract"
)

func main() {
	// BULKMOVE_KNOWN_MEM=N: how many hard-link targets a receiver (this
	// process's, or an agent's or server's) keeps in memory before the
	// rest go to disk (extract.KnownMem).
	if n, err := engine.EnvCount("BULKMOVE_KNOWN_MEM", "hard-link targets"); err != nil {
		termsafe.Errorf(os.Stderr, "%v", err)
		os.Exit(exitUsage)
	} else if n > 0 {
		extract.KnownMem = int(n)
	}
	// BULKMOVE_CPUPROFILE=FILE writes a pprof CPU profile of the run; %p in
	// FILE is replaced by the pid, so that agents write their own.
	if p := os.Getenv("BULKMOVE_CPUPROFILE"); p != "" {
		p = strings.ReplaceAll(p, "%p", strconv.Itoa(os.Getpid()))
		// 0600 like every file bulkmove writes for its user alone.
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
			pprof.StartCPUProfile(f)
			code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "agent":
			return runAgent(args[1:], stdin, stdout, stderr)
		case "serve":
			return runServe(args[1:], stdout, stderr)
		case "verify":
			return runVerify(args[1:], stdout, stderr)
		case "verify-summary":
			return runVerifySummary(args[1:], stdout, stderr)
		case "plan":
			return runPlan(args[1:], stdout, stderr)
		case "version":
			return runVersion(args[1:], stdout, stderr)
		case "send-hub":
			return runHub(args[1:], stdin, stdout, stderr)
		case "join", "send-join":
			return runJoin(args[1:], stdin, stdout, stderr)
		}
	}
	return runMove(args, stdin, stdout, stderr)
}

// Exit codes, documented in --help and README.md.
const (
	exitOK          = 0   // everything moved
	exitUsage       = 1   // bad command line
	exitPartial     = 2   // some entries failed; they were listed on stderr
	exitFatal       = 3   // the job could not be attempted or not completed
	exitMaxDelete   = 25  // --max-delete stopped the deletions (as rsync's)
	exitInterrupted = 130 // stopped by a signal
)

// exitCode is the exit code of an engine outcome.
func exitCode(o engine.Outcome) int {
	switch o {
	case engine.Done:
		return exitOK
	case engine.UsageError:
		return exitUsage
	case engine.Partial:
		return exitPartial
	case engine.MaxDeleteHeld:
		return exitMaxDelete
	case engine.Interrupted:
		return exitInterrupted
	}
	return exitFatal
}

// signalContext is ctx, cancelled by the first SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// newFlagSet is a subcommand's flag set: errors on stderr, and for -h the
// usage text, the flags, then tail.
func newFlagSet(name, usage, tail string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, tail)
	}
	return fs
}

// parse parses a subcommand's args; if not ok, the subcommand exits with
// code: 0 after -h, 1 after a bad flag (the flag package said which).
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}
