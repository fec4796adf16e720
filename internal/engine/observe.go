package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/dataplane"
)

// Observe are the observability flags.
type Observe struct {
	MetricsAddr     string
	ControlToken    string // --control-token: the file
	token           string // read from it by check
	Textfile        string
	TextfileEvery   time.Duration
	Pushgateway     string
	JobName         string
	VerdictInterval time.Duration
}

// check reads the control token, if any, with the checks of every token
// file (its mode, a placeholder, a token that does not look random).
func (o *Observe) check() error {
	if o.ControlToken == "" {
		return nil
	}
	if o.MetricsAddr == "" {
		return errors.New("--control-token needs --metrics-addr: the control endpoint is on the metrics listener")
	}
	tok, err := dataplane.ReadToken(o.ControlToken)
	if err != nil {
		return fmt.Errorf("--control-token: %w", err)
	}
	o.token = tok
	return nil
}

// controlOff is the answer to a write on the control endpoint of a job
// started without --control-token.
const controlOff = "the control endpoint is read-only: start bulkmove with --control-token FILE (a 0600 file holding a secret, e.g. from openssl rand -hex 32) and send \"Authorization: Bearer <the token>\" to change the limit"

// MetricsAt says where metrics listen, at, for --metrics-addr given, and
// that it is loopback only when a host was left out.
func MetricsAt(given string, at net.Addr) string {
	where := fmt.Sprintf("http://%s/metrics", at)
	if _, loopback := metrics.ListenAddr(given); loopback {
		where += " (loopback only: give a host, e.g. 0.0.0.0" + given + ", to be reached from other hosts)"
	}
	return where
}

// ExportReceiver is the hook a receiving daemon (agent, serve) calls with
// each receiver it opens: m exports that one.
func ExportReceiver(m *metrics.Receiver) func(*extract.Receiver) {
	return func(x *extract.Receiver) { m.Set(x) }
}

// observe starts the exporter (with /bwlimit beside /metrics), the
// textfile writer, the bottleneck watcher and the bandwidth control; the
// returned function stops them and writes the final textfile and push.
func (j *job) observe(ctx context.Context, local bool) (stop func(), err error) {
	o := j.flags.Obs
	j.previous(j.m)
	ctx, cancel := context.WithCancel(ctx)
	if err := j.serveMetrics(ctx, j.m, metrics.Route{Pattern: "/bwlimit", Handler: metrics.GuardWrites(j.bw, o.token, controlOff)}); err != nil {
		cancel()
		return nil, err
	}
	j.bw.Start(ctx, func(format string, args ...any) { termsafe.Errorf(j.stderr, format, args...) })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		j.m.Watch(ctx, o.VerdictInterval, 10*o.VerdictInterval, local, func(v *metrics.Verdict) {
			j.ev.bottleneck(v)
			if j.flags.Verbose {
				termsafe.Errorf(j.stderr, "bottleneck: %s (%s); one more stream would %shelp", v.Resource, v.Why, map[bool]string{true: "", false: "not "}[v.MoreStreamsHelp])
			}
		})
	}()
	j.rewriteTextfile(ctx, j.m, &wg)
	return func() {
		cancel()
		j.bw.Stop()
		wg.Wait()
	}, nil
}

// serveMetrics exports m, and the routes given, on --metrics-addr (if
// given) until ctx ends, and says where.
func (j *job) serveMetrics(ctx context.Context, m *metrics.Job, routes ...metrics.Route) error {
	o := j.flags.Obs
	if o.MetricsAddr == "" {
		return nil
	}
	addr, err := metrics.Serve(ctx, o.MetricsAddr, m.Registry(Version), routes...)
	if err != nil {
		return err
	}
	termsafe.Errorf(j.stderr, "metrics on %s", MetricsAt(o.MetricsAddr, addr))
	return nil
}

// rewriteTextfile rewrites --metrics-textfile (if given) with m every
// --metrics-textfile-interval until ctx ends, in a goroutine wg counts.
func (j *job) rewriteTextfile(ctx context.Context, m *metrics.Job, wg *sync.WaitGroup) {
	o := j.flags.Obs
	if o.Textfile == "" || o.TextfileEvery <= 0 {
		return
	}
	fileReg := m.FileRegistry(Version)
	wg.Go(func() {
		t := time.NewTicker(o.TextfileEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := metrics.WriteTextfile(o.Textfile, fileReg); err != nil {
					termsafe.Errorf(j.stderr, "warning: %v", err)
				}
			}
		}
	})
}

// observeRemote starts, on a remote-to-remote move's control host, the
// exporter and the textfile writer of m, the figures box1's job sends
// with its progress: the returned function stops them (writeOutcome
// writes the last textfile and push). The bandwidth limit and the
// verdict are box1's: /bwlimit here shows box1's limit and asks box1 to
// change it (j.r2rLimit), with the same --control-token rule as a push.
func (j *job) observeRemote(ctx context.Context, m *metrics.Job) (stop func(), err error) {
	j.previous(m)
	ctx, cancel := context.WithCancel(ctx)
	relay := throttle.Relay{Rate: m.Limit.Rate, Ask: j.r2rLimit.ask}
	if err := j.serveMetrics(ctx, m, metrics.Route{Pattern: "/bwlimit", Handler: metrics.GuardWrites(relay, j.flags.Obs.token, controlOff)}); err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	j.rewriteTextfile(ctx, m, &wg)
	return func() {
		cancel()
		wg.Wait()
	}, nil
}

// previous reads back, into m, how the last run that wrote
// --metrics-textfile ended, so that its exit code and last success stay
// in the file (and on --metrics-addr) until this run ends.
func (j *job) previous(m *metrics.Job) {
	o := j.flags.Obs
	if o.Textfile == "" {
		return
	}
	prev, err := metrics.ReadOutcome(o.Textfile, m.Shard)
	if err != nil {
		termsafe.Errorf(j.stderr, "warning: %v; the last success time starts anew", err)
		return
	}
	m.SetPrevious(prev)
}

// writeOutcome writes, at the end of a run that ended as o (whatever it
// was: refused, failed, interrupted, done), the job's metrics with its
// outcome to --metrics-textfile and --pushgateway.
func (j *job) writeOutcome(o Outcome) {
	obs := j.flags.Obs
	if obs.Textfile == "" && obs.Pushgateway == "" || j.flags.DryRun {
		return // a dry run is no run of the job: it leaves its outcome alone
	}
	m := j.m
	if m == nil { // ended before it measured anything
		m = metrics.NewJob(0)
		if !j.start.IsZero() {
			m.Start = j.start
		}
		if sh := j.flags.Scale.Shard; !sh.All() {
			m.Shard = sh.String()
		}
		j.previous(m)
	}
	code := j.code(o)
	m.End(code, time.Now())
	reg := m.FileRegistry(Version)
	if obs.Textfile != "" {
		if err := metrics.WriteTextfile(obs.Textfile, reg); err != nil {
			termsafe.Errorf(j.stderr, "warning: %v", err)
		}
	}
	if obs.Pushgateway != "" {
		host, _ := os.Hostname()
		group := map[string]string{"instance": host}
		if m.Shard != "" {
			group["shard"] = m.Shard // N shards on one host: N groups, not one overwritten
		}
		if err := metrics.Push(obs.Pushgateway, obs.JobName, group, reg, code != 0); err != nil {
			// The URL without its password: stderr goes to --log-file.
			name := obs.Pushgateway
			if u, perr := url.Parse(name); perr == nil {
				name = u.Redacted()
			}
			termsafe.Errorf(j.stderr, "warning: pushgateway %s: %v", name, err)
		}
	}
}

// bottleneck is the verdict for the summary line.
func (j *job) bottleneck() string {
	if j.m == nil {
		return ""
	}
	if v := j.m.Verdict(); v != nil && v.Resource != metrics.Idle {
		return fmt.Sprintf("; bottleneck %s", v.Resource)
	}
	return ""
}
