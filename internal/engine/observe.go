package engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/dataplane"
)

// obsFlags are the observability flags.
type obsFlags struct {
	metricsAddr     string
	controlToken    string // --control-token: the file
	token           string // read from it by check
	textfile        string
	textfileEvery   time.Duration
	pushgateway     string
	jobName         string
	verdictInterval time.Duration
}

func (o *obsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "export Prometheus metrics on `host:port`; without a host on loopback only (:0 picks a port and prints it; 0.0.0.0:PORT for all interfaces)")
	fs.StringVar(&o.controlToken, "control-token", "", "allow PUT /bwlimit on the --metrics-addr listener to requests with \"Authorization: Bearer TOKEN\", the token in `FILE` (mode 0600 or 0640); off without")
	fs.StringVar(&o.textfile, "metrics-textfile", "", "write the metrics to `file` for node_exporter's textfile collector, atomically, at exit and every --metrics-textfile-interval")
	fs.DurationVar(&o.textfileEvery, "metrics-textfile-interval", 15*time.Second, "how often --metrics-textfile is rewritten while the job runs")
	fs.StringVar(&o.pushgateway, "pushgateway", "", "push the final metrics to this Pushgateway `URL` at exit")
	fs.StringVar(&o.jobName, "job-name", "bulkmove", "job label for --pushgateway")
	o.verdictInterval = time.Second
}

// check reads the control token, if any, with the checks of every token
// file (its mode, a placeholder, a token that does not look random).
func (o *obsFlags) check() error {
	if o.controlToken == "" {
		return nil
	}
	if o.metricsAddr == "" {
		return errors.New("--control-token needs --metrics-addr: the control endpoint is on the metrics listener")
	}
	tok, err := dataplane.ReadToken(o.controlToken)
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
	o := j.flags.obs
	reg := j.m.Registry(Version)
	ctx, cancel := context.WithCancel(ctx)
	if o.metricsAddr != "" {
		control := metrics.GuardWrites(j.bw, o.token, controlOff)
		addr, err := metrics.Serve(ctx, o.metricsAddr, reg, metrics.Route{Pattern: "/bwlimit", Handler: control})
		if err != nil {
			cancel()
			return nil, err
		}
		termsafe.Errorf(j.stderr, "metrics on %s", MetricsAt(o.metricsAddr, addr))
	}
	stderr := j.stderr // the progress display's, if any: it outlives the control
	j.bw.start(ctx, func(format string, args ...any) { termsafe.Errorf(stderr, format, args...) })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		j.m.Watch(ctx, o.verdictInterval, 10*o.verdictInterval, local, func(v *metrics.Verdict) {
			j.ev.bottleneck(v)
			if j.flags.verbose {
				termsafe.Errorf(j.stderr, "bottleneck: %s (%s); one more stream would %shelp", v.Resource, v.Why, map[bool]string{true: "", false: "not "}[v.MoreStreamsHelp])
			}
		})
	}()
	if o.textfile != "" && o.textfileEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(o.textfileEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := metrics.WriteTextfile(o.textfile, reg); err != nil {
						termsafe.Errorf(j.stderr, "warning: %v", err)
					}
				}
			}
		}()
	}
	return func() {
		cancel()
		j.bw.stop()
		wg.Wait()
		if o.textfile != "" {
			if err := metrics.WriteTextfile(o.textfile, reg); err != nil {
				termsafe.Errorf(j.stderr, "warning: metrics textfile: %v", err)
			}
		}
		if o.pushgateway != "" {
			host, _ := os.Hostname()
			group := map[string]string{"instance": host}
			if j.m.Shard != "" {
				group["shard"] = j.m.Shard // N shards on one host: N groups, not one overwritten
			}
			if err := metrics.Push(o.pushgateway, o.jobName, group, reg); err != nil {
				termsafe.Errorf(j.stderr, "warning: pushgateway %s: %v", o.pushgateway, err)
			}
		}
	}, nil
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
