// Command bulkmove moves huge trees of small files between directories and
// hosts over K parallel streams. main parses the command line and maps
// outcomes to exit codes; the move itself is package internal/engine.
package main

import (
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

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
		os.Exit(engine.ExitUsage)
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
			return engine.RunVerify(args[1:], stdout, stderr)
		case "verify-summary":
			return engine.RunVerifySummary(args[1:], stdout, stderr)
		case "plan":
			return engine.RunPlan(args[1:], stdout, stderr)
		case "version":
			return engine.RunVersion(args[1:], stdout, stderr)
		case "send-hub":
			return engine.RunHub(args[1:], stdin, stdout, stderr)
		case "join", "send-join":
			return engine.RunJoin(args[1:], stdin, stdout, stderr)
		}
	}
	return engine.RunMove(args, stdout, stderr)
}
