package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/send"
)

func (j *job) summary(err error, interrupted bool) {
	el := time.Since(j.start)
	del := j.del.Stats()
	j.mu.Lock()
	defer j.mu.Unlock()
	rate := float64(j.bytes) / el.Seconds()
	deleted := ""
	if j.flags.Delete {
		deleted = "; " + units.Count(int64(del.Deleted)) + " deleted"
		switch {
		case del.Skipped:
			deleted = "; deletion skipped (errors)"
		case del.Refused:
			deleted = "; deletion refused (the --delete guard)"
		case del.Held > 0:
			deleted += " (" + units.Count(int64(del.Held)) + " more held back by --max-delete)"
		}
	}
	if j.saved > 0 {
		deleted += "; " + units.Size(j.saved) + " not sent (block delta)"
	}
	if j.changed > 0 {
		deleted += "; " + units.Count(int64(j.changed)) + " changed during transfer"
	}
	resumed := ""
	if j.resumed > 0 {
		// Found in place by the receiver, as the journal said an earlier
		// run left them.
		resumed = " (" + units.Count(int64(j.resumed)) + " of them named by the resume journal)"
	}
	if j.resent > 0 {
		termsafe.Errorf(j.stderr, "warning: %d files the resume journal named were not in place at %s (deleted or changed there since): sent again", j.resent, j.dst)
	}
	// Counts as the progress line writes them: 20,000.
	line := fmt.Sprintf("%s files, %s in %.2fs (%s/s, %s files/s)%s; %s up to date%s%s; %s errors%s",
		units.Count(int64(j.files)), units.Size(j.bytes), el.Seconds(), units.Size(int64(rate)), units.Count(int64(float64(j.files)/el.Seconds())),
		compression(j.m), units.Count(int64(j.skipped)), resumed, deleted, units.Count(int64(j.failed+j.walkErrs)), j.bottleneck())
	switch {
	case interrupted:
		termsafe.Errorf(j.stderr, "interrupted: %s; run the same command again to finish", line)
	case err != nil:
		termsafe.Errorf(j.stderr, "%v", err)
		if errors.Is(err, send.ErrNoSpace) && j.m != nil {
			left := max(j.m.PlannedBytes.Load()-j.m.DoneBytes.Load(), 0)
			termsafe.Errorf(j.stderr, "%s is full: %s of the %s found so far still to move (more if the walk was not over); "+
				"what was acknowledged is in place: free some space and run the same command again to resume",
				j.dst, units.Size(left), units.Size(j.m.PlannedBytes.Load()))
		}
		termsafe.Errorf(j.stderr, "failed: %s", line)
	case j.flags.Quiet && j.failed+j.walkErrs == 0 && !del.Refused && !del.Skipped && del.Held == 0:
		// -q: all went well, nothing to say.
	default:
		termsafe.Errorf(j.stderr, "%s", line)
	}
}

// end emits the --json summary.
func (j *job) end(pool *send.Pool, err error, code int) {
	if j.ev == nil {
		return
	}
	j.ev.progress(j.m, true)
	el := time.Since(j.start).Seconds()
	j.mu.Lock()
	e := &EndEvent{Files: j.files, Bytes: j.bytes, Links: j.links, Skipped: j.skipped, Resumed: j.resumed, Errors: j.failed + j.walkErrs,
		Elapsed: el, BytesRate: event.Rate(j.bytes, el), FilesRate: event.Rate(j.files, el), ExitCode: code,
		Streams: streamTotals(pool.Stats()), Bottleneck: metrics.Idle}
	j.mu.Unlock()
	if v := j.m.Verdict(); v != nil {
		e.Bottleneck = v.Resource
	}
	e.WireBytes = j.m.WireBytes()
	e.CompressedIn, e.CompressedOut = j.m.Compressed()
	e.Stats = j.rsyncStats()
	if err != nil {
		e.Error = err.Error()
	}
	j.ev.emit("end", &e.Head, e)
}
