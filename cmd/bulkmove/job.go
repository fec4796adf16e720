package main

import (
	"context"
	"io"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// runJob runs a move with what the engine leaves to the command: the
// progress display on a terminal (--progress), --log-file, and the
// signals (SIGINT and SIGTERM stop it gracefully within --grace, SIGUSR1
// and SIGUSR2 halve and double the bandwidth limit). commandLine, and
// preset (the flags the environment and config file set), head the pass
// in the log; its footer has the exit code.
func runJob(ctx context.Context, j engine.Job, commandLine, preset []string) (code int) {
	c := j.Config
	var tw *ttyWriter
	if progressShown(c, j.Stderr) {
		// Every message first clears the progress display, if it is on.
		tw = &ttyWriter{w: j.Stderr}
		j.Stderr = tw
	}
	if c.LogFile != "" {
		lf, err := openLog(c.LogFile, c.LogLevel)
		if err != nil {
			termsafe.Errorf(j.Stderr, "%v", err)
			if c.JSON {
				event.WriteUsageEnd(j.Stdout, err, exitUsage)
			}
			return exitUsage
		}
		defer lf.Close()
		start := time.Now()
		lf.header(start, &j, commandLine, preset)
		j.Stderr = teeLog(j.Stderr, lf)
		j.Log, j.Logged = lf, &engine.Logged{}
		defer func() { lf.footer(start, c.DryRun, code, j.Logged) }()
		if lf.debug {
			j.Trace = lf
		}
	}
	j.Watch = progress(tw, j.Stderr, c.Progress, c.Verbose)
	j.RemoteProgress = remoteProgress(tw, j.Stderr, c.Verbose)
	ctx, drain, stop := interrupts(ctx, c.Grace, j.Stderr)
	defer stop()
	limit, stopLimit := bwSignals()
	defer stopLimit()
	j.Drain, j.Limit = drain, limit
	return exitCode(j.Run(ctx))
}

// progressShown says whether a move draws its progress display on stderr:
// a terminal, not --progress=none, not -q (rsync's -q: nothing but errors).
func progressShown(c engine.Config, stderr io.Writer) bool {
	return isTerminalWriter(stderr) && c.Progress != "none" && !c.Quiet
}
