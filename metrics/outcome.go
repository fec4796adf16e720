package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Outcome is how a run of the job ended: what the textfile and the
// Pushgateway keep after the process is gone, so that a job that failed,
// or stopped running, is seen (and alerted on) rather than vanishing.
type Outcome struct {
	ExitCode    int
	Duration    time.Duration
	FilesFailed int64
	// LastSuccess is when a run last ended with exit code 0; zero: not
	// known.
	LastSuccess time.Time
}

var (
	dRunning     = newDesc("job_running", "1 while the job runs; 0 in what it writes at its end (--metrics-textfile, --pushgateway).", prometheus.GaugeValue)
	dLastSuccess = newDesc("job_last_success_timestamp_seconds", "When a run of the job last ended with exit code 0, Unix time (kept across runs: read back from the previous --metrics-textfile).", prometheus.GaugeValue)
	dLastExit    = newDesc("job_last_exit_code", "The exit code of the job's last finished run (while a run goes on: the one before it, from the previous --metrics-textfile).", prometheus.GaugeValue)
	dDuration    = newDesc("job_duration_seconds", "How long the job's last finished run took.", prometheus.GaugeValue)
	dFilesFailed = newDesc("job_files_failed", "Entries the job's last finished run could not move.", prometheus.GaugeValue)
	outcomeDescs = []desc{dRunning, dLastSuccess, dLastExit, dDuration, dFilesFailed}
)

// outcome is a Job's record of its runs: the previous one's, read back,
// and this one's once it ended.
type outcome struct {
	mu    sync.Mutex
	prev  *Outcome // the run before this one, if known
	ended *Outcome // this run, once it ended
}

// SetPrevious records how the run before this one ended (ReadOutcome), so
// that its exit code and its last success are exported until this run
// ends, and the last success after it if this run fails.
func (j *Job) SetPrevious(o *Outcome) {
	j.outcome.mu.Lock()
	defer j.outcome.mu.Unlock()
	j.outcome.prev = o
}

// End records how this run ended: exit code, and the time it ended at.
// The job's collector reports it from now on (bulkmove_job_running 0).
func (j *Job) End(exitCode int, at time.Time) Outcome {
	o := Outcome{ExitCode: exitCode, Duration: at.Sub(j.Start), FilesFailed: j.Failed.Load()}
	j.outcome.mu.Lock()
	defer j.outcome.mu.Unlock()
	switch {
	case exitCode == 0:
		o.LastSuccess = at
	case j.outcome.prev != nil:
		o.LastSuccess = j.outcome.prev.LastSuccess
	}
	j.outcome.ended = &o
	return o
}

// Ended says whether End was called, and with which exit code.
func (j *Job) Ended() (exitCode int, ended bool) {
	j.outcome.mu.Lock()
	defer j.outcome.mu.Unlock()
	if j.outcome.ended == nil {
		return 0, false
	}
	return j.outcome.ended.ExitCode, true
}

func (j *Job) collectOutcome(m func(d desc, v float64, labels ...string)) {
	j.outcome.mu.Lock()
	o, running := j.outcome.ended, j.outcome.ended == nil
	if running {
		o = j.outcome.prev
	}
	j.outcome.mu.Unlock()
	m(dRunning, b2f(running))
	if o == nil {
		return
	}
	if !o.LastSuccess.IsZero() {
		m(dLastSuccess, float64(o.LastSuccess.UnixNano())/1e9)
	}
	m(dLastExit, float64(o.ExitCode))
	m(dDuration, o.Duration.Seconds())
	m(dFilesFailed, float64(o.FilesFailed))
}

// ReadOutcome reads back, from a textfile an earlier run wrote
// (WriteTextfile), how that run ended: the series of the outcome whose
// shard label is shard ("": none). A missing file is no outcome and no
// error; so is a file that has the series of a running job only (a run
// that was killed: its exit code is not known, its last success is).
func ReadOutcome(path, shard string) (*Outcome, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("metrics textfile %s: %w", path, err)
	}
	value := func(d desc) (float64, bool) {
		mf := mfs[d.name]
		if mf == nil {
			return 0, false
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "shard") == shard && m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	var o Outcome
	found := false
	if v, ok := value(dLastSuccess); ok && v > 0 {
		o.LastSuccess = time.Unix(0, int64(v*1e9))
		found = true
	}
	if v, ok := value(dLastExit); ok {
		o.ExitCode = int(v)
		if d, ok := value(dDuration); ok {
			o.Duration = time.Duration(d * float64(time.Second))
		}
		if n, ok := value(dFilesFailed); ok {
			o.FilesFailed = int64(n)
		}
		found = true
	} else if found {
		// Only a last success: the run that wrote the file did not
		// end (killed). Its exit code is unknown: not a success.
		o.ExitCode = -1
	}
	if !found {
		return nil, nil
	}
	return &o, nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
