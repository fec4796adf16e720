package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bulkmove/bulkmove/internal/engine/deletion"
	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/engine/pull"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// A pull (SRC on a remote host) is package pull: this host receives from
// a send-hub on the remote one, which runs the same sender job as a push
// over the streams this host opened (a job whose target is those
// streams: hub).

func (j *job) resolveHub() (plan, Outcome) {
	var p plan
	src, fi, err := paths.ResolveSrc(j.src) // as a push resolves it
	if err != nil {
		return p, j.fail(Failed, fmt.Errorf("source %s: %w", j.src, paths.Unwrap(err)))
	}
	p.walkRoot, p.src.Root, p.srcReal = src, src, src
	if !fi.IsDir() {
		p.src = source.Source{Root: filepath.Dir(src), File: src}
		p.rename = filepath.Base(j.src)
		if j.as != "" {
			p.rename = j.as
		}
	}
	return p, Done
}

// Hub is the sending end of a pull (bulkmove send-hub): it walks Src as
// Config says and sends it over the streams the puller opens, the first
// on Stdin and Stdout, the others through a socket each joins. As names a
// single-file Src at the receiver; DstIDs is the puller's DEST (JSON of
// a HostPlace), for refusing a Src that overlaps it on this machine.
type Hub struct {
	Config  Config
	Src, As string
	DstIDs  string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Limit   <-chan throttle.Request // as Job.Limit
}

// Run serves the pull until the job is over.
func (h Hub) Run(ctx context.Context) Outcome {
	f, stdout, stderr := h.Config, h.Stdout, h.Stderr
	if err := hubOverlap(h.Src, h.DstIDs); err != nil {
		// One line in place of the banner: the puller shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		return UsageError
	}
	f.Gentle.Apply(stderr)
	streams, err := pull.Accept(f.Jobs, h.Stdin, stdout, stderr)
	if err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return Failed
	}
	// Its stdout is the first stream: --stats goes to stderr, which the
	// puller shows.
	j := &job{flags: f, stdout: io.Discard, stderr: stderr, statsOut: stderr, src: h.Src, dst: "receiver", target: target{hub: streams, as: h.As}}
	j.asks = h.Limit
	return j.run(ctx)
}

// hubOverlap refuses, on the host of a pull's SRC, a SRC that overlaps
// the puller's DEST (dstIDs, JSON of a HostPlace) on this same machine.
// A SRC that cannot be resolved is left to the job, which reports it.
func hubOverlap(src, dstIDs string) error {
	if dstIDs == "" {
		return nil
	}
	dst, err := paths.DecodeHostPlace(dstIDs)
	if err != nil {
		return err
	}
	if !dst.SameHost() {
		return nil
	}
	real, _, err := paths.ResolveSrc(src)
	if err != nil {
		return nil
	}
	s, err := paths.PlaceOf(src, real)
	if err != nil {
		return nil
	}
	if err := paths.Overlap(s, dst.Place); err != nil {
		return fmt.Errorf("on this host, %w", err)
	}
	return nil
}

// pull receives a remote SRC into a local DEST.
func (j *job) pull(ctx context.Context, t sshx.Target) Outcome {
	if j.flags.DryRun {
		return j.fail(UsageError, fmt.Errorf("--dry-run of a pull: run it on %s", t.Host))
	}
	if j.flags.Scale.FilesFrom != "" {
		return j.fail(UsageError, fmt.Errorf("--files-from with a remote SRC: run it on %s (the list is read where the walk runs)", t.Host))
	}
	// --bwlimit paces what this host receives: the remote sender slows
	// down as the streams fill up.
	bw := throttle.New(j.flags.Gentle.BwLimit, nil, j.asks)
	bw.Start(ctx, func(format string, args ...any) { termsafe.Errorf(j.stderr, format, args...) })
	defer bw.Stop()
	opt := j.flags.SSH.options(isTerminal(os.Stdin))
	opt.Stderr = j.stderr
	rsh, err := j.openSSH(t, opt)
	if err != nil {
		return j.fail(UsageError, err)
	}
	var linker sshx.Linker
	if rsh != nil {
		defer rsh.Close()
		linker = rsh
	}
	p := &pull.Puller{Target: t, Dest: j.dst, Jobs: j.flags.Jobs, SSH: opt, Linker: linker,
		RemoteBulkmove: j.flags.SSH.RemoteBulkmove, Version: Version,
		ResolveDest: func(dest string) (string, error) {
			root, err := paths.ResolveDest(dest)
			if err != nil {
				return "", fmt.Errorf("destination %s: %v", dest, paths.Unwrap(err))
			}
			return root, nil
		},
		// The sender's options, as it takes them: the whole Config, less
		// what only this host uses (forSender).
		SenderConfig: func(streams int) (string, error) { return EncodeSenderConfig(j.flags.forSender(streams)) },
		// Where SRC's host is this one, the send-hub refuses a DEST that
		// overlaps SRC.
		DstIDs: func(named, target string) string {
			if id := paths.HostID(); id != "" {
				if pl, err := paths.PlaceOf(named, target); err == nil {
					return paths.HostPlace{Machine: id, Place: pl}.Encode()
				}
			}
			return ""
		},
		Policy: j.pullPolicy(),
		Pace:   bw.Reader,
		Stderr: j.stderr,
	}
	j.pulling = true
	if j.out != nil || j.logFmt != nil || j.flags.Verbose && j.flags.Backup.On {
		// This host is the receiving end: its receiver itemizes, and
		// the lines are printed here, as rsync prints a pull's; so are
		// those of what it moved aside.
		p.Items = func(entries []model.Entry, ack *wire.BatchAck) {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.itemize(send.Result{Batch: &model.Batch{Entries: entries}, Ack: ack})
			j.noteBackups(ack)
			// The remote sender says so on stderr too; the log names
			// them as a push's does.
			for _, e := range ack.Errors {
				if e.Index < len(entries) {
					j.logFailedMsg(entries[e.Index].Path, e.Msg)
				}
			}
		}
		p.Pruned = func(r *wire.PruneResult) {
			j.mu.Lock()
			defer j.mu.Unlock()
			for _, e := range r.Removed {
				if e.Backup {
					j.noteBackup(e.Path)
				}
				j.itemizeDeleted(deletion.PrunedName(e))
			}
			for _, e := range r.Errors {
				j.logDeleteFailed(e)
			}
		}
	}
	switch p.Run(ctx) {
	case pull.Done:
		return Done
	case pull.Interrupted:
		return Interrupted
	case pull.Remote:
		o := remoteOutcome(p.Status)
		if o != Done {
			// Its messages came on stderr; the --json end event says
			// where to look.
			j.failure = fmt.Errorf("pull from %s: the remote sender exited with status %d (its messages are on stderr)", t.Host, p.Status)
		}
		return o
	}
	return Failed
}
