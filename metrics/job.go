package metrics

import (
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
)

// Job holds a job's totals, updated by the sender as it goes.
type Job struct {
	PlannedBytes atomic.Int64 // grows while the walk runs
	PlannedFiles atomic.Int64
	WalkDone     atomic.Bool
	DoneBytes    atomic.Int64
	DoneFiles    atomic.Int64
	Skipped      atomic.Int64 // files already up to date
	Failed       atomic.Int64 // entries that could not be moved
	Start        time.Time
	// Limit is the job's bandwidth limit (--bwlimit), whose rate may
	// change while the job runs; nil: none.
	Limit *ratelimit.Bucket

	Streams []*Stream

	// Shard, if set (--shard i/N), is the value of a shard label on every
	// bulkmove_* series of the job: N senders of one tree, each exporting
	// its own part, are told apart and summed by it.
	Shard string

	// SourceLatency, if set, reports the source filesystem's latency per
	// operation (the sender's measure; the receiver's comes in its acks).
	SourceLatency func() time.Duration

	// AutoJ is -j auto's target and decisions (autoj.go).
	AutoJ AutoJ

	verdict atomic.Pointer[Verdict]
	outcome outcome
}

// NewJob starts the clock of a job over k streams.
func NewJob(k int) *Job {
	j := &Job{Start: time.Now(), Streams: make([]*Stream, k)}
	for i := range j.Streams {
		j.Streams[i] = &Stream{}
	}
	return j
}

// Work is the job's work done and found so far, in bytes plus a per-file
// allowance: what the ETA and the progress bar measure.
func (j *Job) Work() (done, planned float64) {
	done = float64(j.DoneBytes.Load() + (j.DoneFiles.Load()+j.Skipped.Load()+j.Failed.Load())*fileWeight)
	planned = float64(j.PlannedBytes.Load() + j.PlannedFiles.Load()*fileWeight)
	return done, planned
}

// ETA estimates the seconds left from the average rate so far and the
// bytes (plus a per-file allowance) still planned; -1 if unknown.
func (j *Job) ETA() float64 {
	el := time.Since(j.Start).Seconds()
	done, plan := j.Work()
	if done <= 0 || el <= 0 {
		return -1
	}
	left := plan - done
	if left < 0 {
		left = 0
	}
	return left / (done / el)
}

// fileWeight is the per-file cost in bytes used for the ETA, as the sharder
// weighs files for balancing.
const fileWeight = 16 << 10

// SentBytes is the file data the streams have sent so far.
func (j *Job) SentBytes() int64 {
	var n int64
	for _, c := range j.Streams {
		n += c.BytesSent.Load()
	}
	return n
}

// Verdict returns the latest bottleneck verdict, or nil before the first.
func (j *Job) Verdict() *Verdict { return j.verdict.Load() }

// Active counts the streams at work.
func (j *Job) Active() int {
	n := 0
	for _, c := range j.Streams {
		if c.Active.Load() {
			n++
		}
	}
	return n
}

// Compressed is what the streams' compressed batches took as tar before
// compression (in) and on the wire (out).
func (j *Job) Compressed() (in, out int64) {
	for _, c := range j.Streams {
		in += c.CompressIn.Load()
		out += c.CompressOut.Load()
	}
	return in, out
}

// WireBytes is what the streams wrote to their connections.
func (j *Job) WireBytes() (n int64) {
	for _, c := range j.Streams {
		n += c.WireBytes.Load()
	}
	return n
}

// WireRead is what the streams read from their connections.
func (j *Job) WireRead() (n int64) {
	for _, c := range j.Streams {
		n += c.WireRead.Load()
	}
	return n
}
