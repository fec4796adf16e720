package engine

import (
	"context"
	"errors"
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
	reg := j.m.Registry(Version)
	ctx, cancel := context.WithCancel(ctx)
	if o.MetricsAddr != "" {
		control := metrics.GuardWrites(j.bw, o.token, controlOff)
		addr, err := metrics.Serve(ctx, o.MetricsAddr, reg, metrics.Route{Pattern: "/bwlimit", Handler: control})
		if err != nil {
			cancel()
			return nil, err
		}
		termsafe.Errorf(j.stderr, "metrics on %s", MetricsAt(o.MetricsAddr, addr))
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
	if o.Textfile != "" && o.TextfileEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(o.TextfileEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := metrics.WriteTextfile(o.Textfile, reg); err != nil {
						termsafe.Errorf(j.stderr, "warning: %v", err)
					}
				}
			}
		}()
	}
	return func() {
		cancel()
		j.bw.Stop()
		wg.Wait()
		if o.Textfile != "" {
			if err := metrics.WriteTextfile(o.Textfile, reg); err != nil {
				termsafe.Errorf(j.stderr, "warning: metrics textfile: %v", err)
			}
		}
		if o.Pushgateway != "" {
			host, _ := os.Hostname()
			group := map[string]string{"instance": host}
			if j.m.Shard != "" {
				group["shard"] = j.m.Shard // N shards on one host: N groups, not one overwritten
			}
			if err := metrics.Push(o.Pushgateway, o.JobName, group, reg); err != nil {
				termsafe.Errorf(j.stderr, "warning: pushgateway %s: %v", o.Pushgateway, err)
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
