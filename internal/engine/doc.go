// Package engine is the move as a library: one job that walks SRC, sends
// its batches over K streams to a receiver, and finishes with --delete,
// the resume journal and a summary. cmd/bulkmove parses the command line
// and maps outcomes to exit codes; the engine does the rest.
//
// The API: a Job (a Config, SRC and DEST, and the writers it reports to)
// runs with Job.Run (a move) or Job.Verify, and returns an Outcome, which
// cmd/bulkmove maps to an exit code; a Hub is the sending end of a pull,
// an R2RSender that of a remote-to-remote move.
// Config (config.go) holds every option, with DefaultConfig and Check.
// As a library the engine draws nothing on a terminal, opens no log file
// and installs no signal handler: cmd/bulkmove does, and reaches the job
// through the Job's Drain (a graceful stop), Limit (halve or double the
// bandwidth limit), Watch (what the job measures, for a progress display)
// and Trace (the -v phase lines, for --log-level debug).
//
// Where things are, by concern:
//
//   - run.go, config.go, sendconfig.go: the API above, and the Config a
//     pull sends its remote sender.
//   - job.go: the job and its run, from resolving SRC and DEST to the exit
//     code; its state is split into embedded structs by concern.
//     It reports only through the writers the Job gives.
//   - resolve.go, space.go: where the job reads and writes (the plan,
//     with package internal/engine/paths: SRC and DEST resolved, overlap
//     refusals), free space at DEST.
//   - streams.go, check.go, compress.go, faithful.go, ioconc.go, split.go,
//     scale.go: what goes on the streams and how (the sharder's batches,
//     the skip rules, compression, metadata, --split-size, shards).
//   - autoj.go (-j auto, by package internal/engine/autojobs over
//     send/autoj's controller) and bwlimit.go (--bwlimit, --max-read-rate,
//     by package internal/engine/throttle, which also holds --nice): the
//     controllers that steer the streams while they run.
//   - delete.go, verify.go, journal.go, summary.go: the finish: --delete,
//     the verify subcommand, the resume journal, the summary line and the
//     --json end event. delete.go, verify.go and journal.go only hand the
//     job's options and streams to the packages that do the work:
//     internal/engine/deletion (the sending side of --delete: the
//     listing, the guard, --max-delete), internal/engine/verify (verify
//     and verify-summary) and internal/engine/resume (the journal, whose
//     path journal.go computes).
//   - transport.go chooses the job's transport once (package transport:
//     local, --via-agent, SSH and the agent's data plane, bulkmove://, a
//     pull's send-hub over the streams its puller opened), from the
//     options in transport_ssh.go, transport_serve.go, transport_hub.go;
//     the job opens its K streams over it, and redials and adds streams
//     through it. pull.go starts a pull (package internal/engine/pull: the
//     puller, and the send-hub on the remote host accepting its streams).
//     r2r.go is a move from one remote host to another, run on a control
//     host (the agent on box2, the sender on box1, the path between them,
//     box1's output followed here); r2r_send.go is box1's end of it
//     (R2RSender, bulkmove --r2r-send).
//   - events.go (the --json schema; the events its packages share are in
//     internal/engine/event), observe.go (metrics, the /bwlimit
//     endpoint, the bottleneck verdict): what the job reports while it
//     runs.
//
// Everything the engine prints for people goes through termsafe.Printf
// and termsafe.Errorf, which escape names. The engine imports the sending
// side (send, send/source), the receiving side (receive, for a pull's
// receiver, and receive/extract, for a local DEST), the transports and the
// wire; nothing imports the engine but cmd/bulkmove, and the packages
// under it (deletion, verify, event) never do.
package engine
