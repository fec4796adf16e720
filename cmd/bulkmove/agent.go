package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/receive/agentd"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

const agentUsage = `usage: bulkmove --agent [--metrics-addr host:port] [--hub K] ROOT

Receives batches on standard input and answers on standard output, writing
under ROOT (created if missing). The sender starts it, locally or over SSH;
it is not meant to be run by hand.

With --hub K, it first prints "BULKMOVE-HUB2 SOCKET job=JOBTOKEN
[linger=LINGERTOKEN] [OFFER]" and accepts more streams of the same job on
SOCKET, a Unix socket in this user's private directory ($XDG_RUNTIME_DIR/
bulkmove, else ~/.local/state/bulkmove/run, each checked before use), which the
sender reaches through its other SSH connections (forwarded, or relayed by
"bulkmove --join SOCKET"). Each connection proves it holds the job's token
(JOIN2), and the agent proves it too, before anything else is sent. All K
streams share one receiver. With --data tls (or tcp) it also listens on a
port of --data-ports for K streams, each presenting the one-time token of
OFFER ("data=MODE:PORT:CERT-SHA256:TOKEN"); stdin is then only held open
by the sender until it is done. The port is on the address the SSH
connection reached the host on (SSH_CONNECTION), or on --data-addr.

With --linger D (and --hub, without --data) the agent stays D after its
last job ends, and a later run of the same user that proves it holds
LINGERTOKEN can start a new job on SOCKET (NEW2), with no login shell and
no new process (bulkmove --linger). Each new job gets the next linger
token; the one it used works no more. The agent takes new jobs for at most
24 h after it started.

With --src-ids (the sender's SRC by device and inode, and its machine),
a ROOT that overlaps SRC on this same machine is refused: the agent prints
"BULKMOVE-REFUSED REASON" in place of its banner and exits 1.

--io-nice (the idle I/O class) and --nice N lower its claim on the disks
and the CPUs, as the sender's flags of the same names ask.

--allow-owner, --allow-setid, --allow-xattrs, --allow-acls and
--allow-devices are what its senders may ask it to keep (as for serve;
all off by default): the sender that starts it gives them from its own
flags, and a Hello asking for more is refused (owners: not heeded).
`

// agentFlags registers the flags of `bulkmove --agent` (transport/ssh and
// internal/engine build its command lines) and returns its run: its
// flags into an agentd.Config, and agentd.Run.
func agentFlags(fs *pflag.FlagSet) func(*call) int {
	metricsAddr := fs.String("metrics-addr", "", "export the receiver's Prometheus metrics on `host:port` (:0 picks a port and prints it)")
	cfg := agentd.Config{Version: engine.Version, CheckRoot: agentRoot}
	fs.IntVar(&cfg.Streams, "hub", 0, "serve `K` streams: this one and K-1 joining on a Unix socket")
	data := fs.String("data", "", "with --hub: also take the K streams over `tls` or tcp, on a port of --data-ports")
	fs.StringVar(&cfg.DataPorts, "data-ports", "", "port `range` for --data, e.g. 50000-50100 (default: any free port)")
	fs.StringVar(&cfg.DataAddr, "data-addr", "", "for --data, listen on this `address` of the host (default: the address SSH reached it on, from SSH_CONNECTION; 0.0.0.0 or :: for all)")
	fs.DurationVar(&cfg.Linger, "linger", 0, "with --hub: stay `duration` after the last job ends, for later runs to reach through the socket")
	fs.StringVar(&cfg.SrcIDs, "src-ids", "", "the sender's SRC by device and inode, with its machine (JSON): a ROOT that overlaps it on this machine is refused")
	var nice throttle.NiceFlags
	registerNice(fs, &nice)
	var allow engine.AllowFlags
	registerAllow(fs, &allow)
	return func(x *call) int {
		if len(x.args) != 1 {
			fs.Usage()
			return exitUsage
		}
		nice.Apply(x.stderr)
		cfg.Root, cfg.Data, cfg.Nice, cfg.Allow = x.args[0], dataplane.Mode(*data), nice.Text(), wire.Allow(allow)
		return runAgent(x, cfg, *metricsAddr)
	}
}

// runAgent runs the agent of cfg until its jobs end (or a signal).
func runAgent(x *call, cfg agentd.Config, metricsAddr string) int {
	ctx, stop := signalContext()
	defer stop()
	var m metrics.Receiver
	if err := serveReceiverMetrics(ctx, &m, metricsAddr, "agent", x.stderr); err != nil {
		return exitUsage
	}
	cfg.Opened = engine.ExportReceiver(&m)
	err := agentd.Run(ctx, cfg, x.stdin, x.stdout)
	var usage *agentd.UsageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		termsafe.Errorf(x.stderr, "agent: %v", err)
		return exitUsage
	case !wire.IsRefused(err):
		// A refused handshake told the sender why, which shows it: not
		// twice (this stderr is the sender's).
		termsafe.Errorf(x.stderr, "%v", err)
	}
	return exitFatal
}

// agentRoot resolves the agent's ROOT (a symlink is followed, as a local
// DEST is) and, given the sender's SRC (srcIDs, JSON of a paths.HostPlace),
// refuses a ROOT that overlaps it on this machine: a push over SSH to the
// host it runs on.
func agentRoot(root, srcIDs string) (string, error) {
	dst, err := paths.ResolveDest(root)
	if err != nil {
		return "", fmt.Errorf("destination %s: %w", root, paths.Unwrap(err))
	}
	if srcIDs == "" {
		return dst, nil
	}
	src, err := paths.DecodeHostPlace(srcIDs)
	if err != nil {
		return "", err
	}
	if !src.SameHost() {
		return dst, nil
	}
	target, named := dst, root
	if src.As != "" {
		target, named = filepath.Join(dst, src.As), filepath.Join(root, src.As)
	}
	d, err := paths.PlaceOf(named, target)
	if err != nil {
		return "", fmt.Errorf("destination %s: %w", named, paths.Unwrap(err))
	}
	if err := paths.Overlap(src.Place, d); err != nil {
		return "", fmt.Errorf("on this host, %w", err)
	}
	return dst, nil
}

// serveReceiverMetrics exports a receiver's metrics on addr (if set),
// saying where on stderr; who names the command in messages.
func serveReceiverMetrics(ctx context.Context, m *metrics.Receiver, addr, who string, stderr io.Writer) error {
	if addr == "" {
		return nil
	}
	at, err := metrics.Serve(ctx, addr, m.Registry(engine.Version))
	if err != nil {
		termsafe.Errorf(stderr, "%s: %v", who, err)
		return err
	}
	termsafe.Errorf(stderr, "%s: metrics on %s", who, engine.MetricsAt(addr, at))
	return nil
}
