package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/autojobs"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/autoj"
)

// -j auto (the default) is package autojobs on this job: the job says
// how many streams it starts with, whether its transport may take more
// (growable), and where decisions are reported.

// AutoJobs are -j auto's flags.
type AutoJobs = autojobs.Flags

// JobsValue is -j: a number of streams, or auto.
type JobsValue struct{ C *Config }

func (v JobsValue) String() string {
	if v.C == nil || v.C.Auto.On {
		return "auto"
	}
	return strconv.Itoa(v.C.Jobs)
}

func (v JobsValue) Type() string { return "N" }

func (v JobsValue) Set(s string) error {
	if s == "auto" {
		v.C.Auto.On = true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a number of streams or auto")
	}
	v.C.Jobs, v.C.Auto.On = n, false
	return nil
}

// autoStart sets, with -j auto, the streams the job starts with, once the
// transport is known.
func (j *job) autoStart() {
	f := &j.flags
	if !f.Auto.On {
		return
	}
	f.Jobs = min(autojobs.Start, f.Auto.Max)
	if j.remote != nil && j.growable() {
		f.Jobs = min(autojobs.SSHStart(), f.Auto.Max) // over SSH, each stream its own connection
	}
}

// nearStart returns the streams -j auto starts with once the first
// connection to the host is up (autojobs.Near); the count it returns is
// the job's from then on.
func (j *job) nearStart(rtt time.Duration, ok bool) int {
	f := &j.flags
	if !f.Auto.On {
		return f.Jobs
	}
	n, d := autojobs.Near(f.Jobs, rtt, ok)
	if d != nil {
		j.autoDecided(*d)
		f.Jobs = n
	}
	return n
}

// nearShare says whether -j auto's first streams to the host are
// channels of its first SSH connection: over a near path (see
// autojobs.Near), where one sshd carries them for less CPU than one each.
func (j *job) nearShare(rtt time.Duration, ok bool) bool {
	return j.flags.Auto.On && autojobs.IsNear(rtt, ok)
}

// autoDecided reports a decision of -j auto: the log, the JSON events and
// the metrics.
func (j *job) autoDecided(d autoj.Decision) {
	if m := j.m; m != nil {
		m.AutoJ.Decided(d.Action)
		m.AutoJ.Target.Store(int64(d.To))
	}
	j.trace("%s", d)
	ev := &StreamsEvent{Action: d.Action, From: d.From, To: d.To, Rate: d.Rate, Gain: d.Gain, Resource: d.Resource, Reason: d.Reason}
	j.ev.emit("streams", &ev.Head, ev)
}

// growable says whether -j auto may add streams to this job.
func (j *job) growable() bool {
	f := j.flags
	switch {
	case !f.Auto.On || f.Auto.Max <= f.Jobs || j.hub != nil || j.serveAddr != "":
		return false
	case j.remote != nil:
		return f.Transport == "" || f.Transport == "ssh" // a data plane takes K streams, no more
	default:
		return !f.ViaAgent
	}
}

// newMetrics makes the job's metrics, with spare counters for the
// streams -j auto may add.
func (j *job) newMetrics() *metrics.Job {
	return autojobs.NewMetrics(j.flags.Jobs, j.flags.Auto.Max, j.growable())
}

// connected fits the metrics' streams to the n that connected.
func (j *job) connected(n int) { autojobs.Connected(j.m, n, j.growable()) }

// steer runs -j auto's controller on the pool while it sends the file
// data; stop ends it and waits for it.
func (j *job) steer(ctx context.Context, pool *send.Pool, local bool) (stop func()) {
	if !j.growable() || !j.tr.Caps().Add {
		return func() {}
	}
	tail, err := EnvCount("BULKMOVE_TUNE_AUTO_TAIL", "seconds")
	if err != nil {
		termsafe.Errorf(j.stderr, "warning: %v", err)
	}
	return autojobs.Steer{Jobs: j.flags.Jobs, Max: j.flags.Auto.Max, Growable: true, Local: local,
		Metrics: j.m, Pool: pool, Transport: j.tr, Tail: tail, Stderr: j.stderr, Decided: j.autoDecided}.Run(ctx)
}

// farAhead is how many connections to open ahead for -j auto's first
// step over a far path (autojobs.FarAhead).
func (j *job) farAhead(rtt time.Duration, ok bool) int {
	if !j.growable() {
		return 0
	}
	return autojobs.FarAhead(j.flags.Jobs, j.flags.Auto.Max, rtt, ok)
}

// StreamsEvent is a decision of -j auto.
type StreamsEvent struct {
	Head
	Action   string  `json:"action"` // add, remove, stop
	From     int     `json:"from"`
	To       int     `json:"to"`
	Rate     float64 `json:"rate"` // bytes plus 16 KiB a file, per second, over the last window
	Gain     float64 `json:"gain"` // of the last step, a fraction
	Resource string  `json:"resource"`
	Reason   string  `json:"reason"`
}
