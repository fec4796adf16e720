// Command bulkmove moves huge trees of small files between directories and
// hosts over K parallel streams. main parses the command line and maps
// outcomes to exit codes; the move itself is package internal/engine.
//
// Every subcommand is a row of one table (commands.go): its name, a line
// saying what it does, a function registering its flags on a flag set of
// its own, its run function, and whether bulkmove starts it itself. Each
// command parses only its own flags, so a flag of another is refused.
//
// The flags are spf13/pflag's, without cobra. pflag gives GNU parsing
// (--name and --name=V, one-letter shorthands that combine as in -xv and
// take values as in -j4, flags after the operands, -- to end them) and
// one flag table that help in sections, generated docs and shell
// completion, and did-you-mean on a mistyped flag can all be read from.
// cobra adds a tree of nested commands, help and usage templates and
// generated completion scripts: bulkmove has ten commands, none nested,
// three of them internal with command lines that bulkmove builds itself
// in fixed forms, and its help text is its own; a table of ten rows does
// not need a framework, and keeps the dispatch, the help and the exit
// codes in this package.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/sshx"
)

func main() {
	// Run by an ssh process of -e as its SSH_ASKPASS: ask the bulkmove
	// that started it (sshx.Askpass), nothing else.
	if code, ok := sshx.AskpassMain(os.Args[1:]); ok {
		os.Exit(code)
	}
	// BULKMOVE_TUNE_KNOWN_MEM=N: how many hard-link targets a receiver (this
	// process's, or an agent's or server's) keeps in memory before the
	// rest go to disk (extract.KnownMem).
	if n, err := engine.EnvCount("BULKMOVE_TUNE_KNOWN_MEM", "hard-link targets"); err != nil {
		termsafe.Errorf(os.Stderr, "%v", err)
		os.Exit(exitUsage)
	} else if n > 0 {
		extract.KnownMem = int(n)
	}
	// BULKMOVE_TUNE_CPUPROFILE=FILE writes a pprof CPU profile of the run; %p in
	// FILE is replaced by the pid, so that agents write their own.
	if p := os.Getenv("BULKMOVE_TUNE_CPUPROFILE"); p != "" {
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

// Exit codes, documented in --help and README.md.
const (
	exitOK          = 0   // everything moved
	exitUsage       = 1   // bad command line
	exitPartial     = 2   // some entries failed; they were listed on stderr
	exitFatal       = 3   // the job could not be attempted or not completed
	exitNeedsLinux  = 4   // this would receive, on a system other than Linux
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
