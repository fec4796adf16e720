package engine

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// Outcome is how a run ended; cmd/bulkmove maps each to its documented
// exit code.
type Outcome int

const (
	Done          Outcome = iota // everything moved (or compared equal)
	UsageError                   // the options or arguments do not make a job
	Partial                      // some entries failed (or differ); each was reported
	Failed                       // the job could not be attempted or completed
	MaxDeleteHeld                // --max-delete kept deletions from going
	Interrupted                  // stopped by a signal
)

// Job is one run of the engine: what to do (Config), between SRC and
// DEST, and where it reports. Stdin is read for --files-from - (nil:
// os.Stdin). Stdout takes --json events and the listings
// of --dry-run and verify; Stderr takes messages for people, each through
// termsafe.Errorf. ExitCode gives the exit code an outcome will have (the
// --json end event carries it); CommandLine is written at the top of
// --log-file.
type Job struct {
	Config         Config
	Src, Dst       string
	Stdin          io.Reader // --files-from -
	Stdout, Stderr io.Writer
	ExitCode       func(Outcome) int
	CommandLine    []string
}

// newJob is the job's state for j, reporting to stderr.
func (j Job) newJob(stderr io.Writer) *job {
	stdin := j.Stdin
	if stdin == nil {
		stdin = os.Stdin
	}
	return &job{flags: j.Config, stdin: stdin, stdout: j.Stdout, stderr: stderr, src: j.Src, dst: j.Dst, exitCode: j.ExitCode}
}

// Run moves SRC into DEST as j.Config says (j.Config.Check must have
// passed). It applies --nice and --io-nice to this process first, and
// stops, as the first SIGINT or SIGTERM asks, once what is in flight has
// landed (--grace).
func (j Job) Run(ctx context.Context) Outcome {
	f := j.Config
	stderr := j.Stderr
	f.Gentle.Apply(stderr) // early: every thread of the process takes them
	var lf *logFile
	if f.LogFile != "" {
		var err error
		if lf, err = openLog(f.LogFile, f.LogLevel); err != nil {
			termsafe.Errorf(stderr, "%v", err)
			return UsageError
		}
		defer lf.Close()
		stderr = teeLog(stderr, lf)
		termsafe.Errorf(lf, "start: bulkmove %s", strings.Join(j.CommandLine, " "))
	}
	jb := j.newJob(stderr)
	jb.log = lf
	ctx, drain, stop := jb.interrupts(ctx, f.Grace)
	defer stop()
	jb.drain = drain
	if f.JSON {
		jb.ev = newEvents(j.Stdout)
	}
	return jb.run(ctx)
}

// remoteOutcome is the outcome of a remote bulkmove that exited with
// status: its documented exit code (as cmd/bulkmove maps outcomes).
func remoteOutcome(status int) Outcome {
	switch status {
	case 0:
		return Done
	case 1:
		return UsageError
	case 2:
		return Partial
	case 25:
		return MaxDeleteHeld
	case 130:
		return Interrupted
	}
	return Failed
}

// code is the exit code of outcome o, for the --json end event.
func (j *job) code(o Outcome) int {
	if j.exitCode != nil {
		return j.exitCode(o)
	}
	return int(o)
}
