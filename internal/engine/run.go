package engine

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
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
// --json end event carries it).
//
// The engine draws nothing on a terminal, opens no log and handles no
// signal: its caller does (cmd/bulkmove), through the rest. Drain, closed,
// stops the job gracefully: no new batch starts, those in flight land,
// and the job ends Interrupted (cancelling Run's context stops it at
// once). Limit brings requests to halve or double the bandwidth limit
// while the job runs. Watch, if set, is called once the streams start,
// with what the job measures, for a progress display; the function it
// returns is called once they have stopped, before the summary. Trace, if
// set, takes the -v phase lines when -v is off (--log-level debug).
type Job struct {
	Config         Config
	Src, Dst       string
	Stdin          io.Reader // --files-from -
	Stdout, Stderr io.Writer
	ExitCode       func(Outcome) int
	Drain          <-chan struct{}
	Limit          <-chan throttle.Request
	Watch          func(*metrics.Job) (stop func())
	Trace          io.Writer
	// Log takes the lines of --log-file about entries: one per entry
	// created, changed, deleted, backed up or failed, each in one Write
	// ('%i %n%L', rsync's default, or --log-file-format's); Logged, if
	// set, counts them, for the pass's footer.
	Log    io.Writer
	Logged *Logged
	// RemoteProgress, if set, is told the progress of a remote-to-remote
	// move, which box1's sender measures, for the display; it returns
	// the function that ends the display.
	RemoteProgress func() (show func(progressline.Job), stop func())

	await func(context.Context) (r2rPath, error) // the path to DEST, once found (R2RSender)
}

// newJob is the job's state for j, reporting to stderr.
func (j Job) newJob(stderr io.Writer) *job {
	stdin := j.Stdin
	if stdin == nil {
		stdin = os.Stdin
	}
	jb := &job{flags: j.Config, stdin: stdin, stdout: j.Stdout, stderr: stderr, src: j.Src, dst: j.Dst, exitCode: j.ExitCode,
		debug: j.Trace, watch: j.Watch, log: j.Log, logged: j.Logged, statsOut: j.Stdout, remoteProgress: j.RemoteProgress}
	jb.await = j.await
	jb.out, jb.logFmt = j.Config.formats(j.Log != nil)
	jb.drain, jb.asks = j.Drain, j.Limit
	return jb
}

// Run moves SRC into DEST as j.Config says (j.Config.Check must have
// passed). It applies --nice and --io-nice to this process first.
func (j Job) Run(ctx context.Context) Outcome {
	j.Config.Gentle.Apply(j.Stderr) // early: every thread of the process takes them
	jb := j.newJob(j.Stderr)
	if j.Config.JSON {
		jb.ev = newEvents(j.Stdout)
	}
	o := jb.run(ctx)
	jb.endIfNone(o)
	jb.writeOutcome(o)
	return o
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

// fail reports err, why the job ends as o before its summary (refused,
// or stopped before its streams ran), on stderr, and keeps it for the
// --json end event; it returns o.
func (j *job) fail(o Outcome, err error) Outcome {
	termsafe.Errorf(j.stderr, "%v", err)
	j.failure = err
	return o
}

// endIfNone writes, with --json, the end event of a job that ended as o
// without one (refused before it started; a dry run; a pull, whose
// counts are the remote sender's): a script reading the events always
// gets an end event with the exit code, and the error if there was one.
func (j *job) endIfNone(o Outcome) {
	if j.ev == nil || j.ev.writer().Ended() {
		return
	}
	err := j.failure
	if err == nil && o != Done {
		err = errors.New(outcomeWords[o])
	}
	ev := event.Refused(err, j.code(o), time.Since(j.start).Seconds())
	ev.DryRun = j.flags.DryRun
	if j.flags.DryRun {
		ev.Stats = j.rsyncStats()
	}
	j.ev.emit("end", &ev.Head, ev)
}

// outcomeWords say how a job ended, for an end event whose error was
// reported elsewhere (a pull's, by the remote sender, on stderr).
var outcomeWords = map[Outcome]string{
	UsageError:    "refused (see stderr)",
	Partial:       "some entries failed (see stderr)",
	Failed:        "failed (see stderr)",
	MaxDeleteHeld: "--max-delete stopped the deletions",
	Interrupted:   "interrupted",
}
