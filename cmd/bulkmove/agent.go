package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/rundir"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

const agentUsage = `usage: bulkmove agent [--metrics-addr host:port] [--hub K] ROOT

Receives batches on standard input and answers on standard output, writing
under ROOT (created if missing). The sender starts it, locally or over SSH;
it is not meant to be run by hand.

With --hub K, it first prints "BULKMOVE-HUB2 SOCKET job=JOBTOKEN
[linger=LINGERTOKEN] [OFFER]" and accepts more streams of the same job on
SOCKET, a Unix socket in this user's private directory ($XDG_RUNTIME_DIR/
bulkmove, else ~/.local/state/bulkmove/run, each checked before use), which the
sender reaches through its other SSH connections (forwarded, or relayed by
"bulkmove join SOCKET"). Each connection proves it holds the job's token
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

--allow-owner, --allow-setid, --allow-xattrs and --allow-acls are what its
senders may ask it to keep (as for serve; all off by default): the sender
that starts it gives them from its own flags, and a Hello asking for more
is refused (owners: not heeded).
`

func runAgent(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bulkmove agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentUsage) }
	metricsAddr := fs.String("metrics-addr", "", "export the receiver's Prometheus metrics on `host:port` (:0 picks a port and prints it)")
	hubStreams := fs.Int("hub", 0, "serve `K` streams: this one and K-1 joining on a Unix socket")
	data := fs.String("data", "", "with --hub: also take the K streams over `tls` or tcp, on a port of --data-ports")
	dataPorts := fs.String("data-ports", "", "port `range` for --data, e.g. 50000-50100 (default: any free port)")
	dataAddr := fs.String("data-addr", "", "for --data, listen on this `address` of the host (default: the address SSH reached it on, from SSH_CONNECTION; 0.0.0.0 or :: for all)")
	linger := fs.Duration("linger", 0, "with --hub: stay `duration` after the last job ends, for later runs to reach through the socket")
	srcIDs := fs.String("src-ids", "", "the sender's SRC by device and inode, with its machine (JSON): a ROOT that overlaps it on this machine is refused")
	var nice niceFlags
	nice.register(fs)
	var allow allowFlags
	allow.register(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	nice.apply(stderr)
	root, err := agentRoot(fs.Arg(0), *srcIDs)
	if err != nil {
		// One line in place of the banner: the sender shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		errorf(stderr, "agent: %v", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stdin = interruptible(ctx, stdin)
	var m metrics.Receiver
	if err := serveReceiverMetrics(ctx, &m, *metricsAddr, "agent", stderr); err != nil {
		return exitUsage
	}
	var dp *dataplane.Listener
	if *data != "" {
		if *hubStreams < 1 || *data != string(dataplane.TLS) && *data != string(dataplane.TCP) {
			errorf(stderr, "agent: --data %q: want tls or tcp, with --hub", *data)
			return exitUsage
		}
		var err error
		if dp, err = dataplane.Listen(dataplane.Mode(*data), dataHost(*dataAddr), *dataPorts, *hubStreams); err != nil {
			errorf(stderr, "agent: %v", err)
			return exitFatal
		}
	}
	if *linger > 0 && (*hubStreams < 1 || dp != nil) {
		errorf(stderr, "agent: --linger needs --hub, and no --data")
		return exitUsage
	}
	if *hubStreams >= 1 {
		err = serveHub(ctx, root, allow, exportReceiver(&m), dp, *linger, nice.text(), stdin, stdout)
	} else {
		hub := &stream.Hub{Root: root, Version: version, Opened: exportReceiver(&m), Policy: allow.policy(agentHint)}
		err = hub.Serve(ctx, stdin, stdout)
	}
	if err != nil {
		if ctx.Err() != nil { // its streams were cut under their reads
			err = stream.Stopped(ctx)
		}
		// A refused handshake told the sender why, which shows it: not
		// twice (this stderr is the sender's).
		if !stream.IsRefused(err) {
			errorf(stderr, "%v", err)
		}
		return exitFatal
	}
	return exitOK
}

// dataHost is the address the data plane listens on: the one asked for,
// else the one the sender's SSH connection reached this host on (the
// server address in SSH_CONNECTION, which the sender can reach; the
// host's other networks are not offered), else, outside SSH, all.
func dataHost(asked string) string {
	if asked != "" {
		return strings.Trim(asked, "[]")
	}
	if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 && net.ParseIP(f[2]) != nil {
		return f[2]
	}
	return ""
}

// agentRoot resolves the agent's ROOT (a symlink is followed, as a local
// DEST is) and, given the sender's SRC (srcIDs, JSON of a hostPlace),
// refuses a ROOT that overlaps it on this machine: a push over SSH to the
// host it runs on.
func agentRoot(root, srcIDs string) (string, error) {
	dst, err := resolveDest(root)
	if err != nil {
		return "", fmt.Errorf("destination %s: %w", root, unwrap(err))
	}
	if srcIDs == "" {
		return dst, nil
	}
	src, err := decodeHostPlace(srcIDs)
	if err != nil {
		return "", err
	}
	if !src.sameHost() {
		return dst, nil
	}
	target, named := dst, root
	if src.As != "" {
		target, named = filepath.Join(dst, src.As), filepath.Join(root, src.As)
	}
	d, err := placeOf(named, target)
	if err != nil {
		return "", fmt.Errorf("destination %s: %w", named, unwrap(err))
	}
	if err := overlap(src.place, d); err != nil {
		return "", fmt.Errorf("on this host, %w", err)
	}
	return dst, nil
}

// interruptible returns r, read by a goroutine of its own, so that a read
// waiting on it ends once ctx is done (SIGTERM or SIGINT): a read of a
// pipe from sshd cannot be cut otherwise, and an agent whose sender went
// quiet outlived a kill until its session closed. The stream then fails
// (its batch in flight is aborted, leaving nothing) and the agent exits.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		// Not io.Copy: *os.File's WriteTo would read 32 KiB at a time.
		_, err := io.CopyBuffer(pw, struct{ io.Reader }{r}, make([]byte, 256<<10))
		pw.CloseWithError(err) // nil: EOF
	}()
	context.AfterFunc(ctx, func() { pr.Close() })
	return pr
}

// serveHub serves the job whose first stream is stdin/stdout, and the
// streams joining it on a Unix socket in this user's private directory
// (see listenPrivate: only this user, or root, can connect, and no one
// else can make the path again once the agent is gone), and, with a data plane (dp not nil), up
// to k streams over TCP or TLS, each presenting the one-time token. With a
// data plane stdin is not a stream: its end (the sender is done, or gone)
// stops new joins.
//
// Every connection to the socket starts with a proof both ways (see
// handle): JOIN2 joins a running job (only the sender that read the job's
// token in the banner can, and a second job cannot land in the first
// one's receiver). With linger > 0 the agent outlives its job: for linger
// after its last job ends it takes NEW2 with the linger token, a whole new
// job whose first stream is that connection (see newJob), so that a later
// pass to the same host reaches it through sshd's forwarding, with no
// login shell and no new process. It returns when every job has ended
// and no new one came, with the first error of the stdin job.
func serveHub(ctx context.Context, root string, allow allowFlags, opened func(*extract.Receiver), dp *dataplane.Listener, linger time.Duration, niceArgs string, stdin io.Reader, stdout io.Writer) error {
	ln, sock, err := rundir.Listen("agent")
	if err != nil {
		// One line in place of the banner: the sender shows why.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		return fmt.Errorf("agent: %w", err)
	}
	defer ln.Close() // removes the socket
	d := &hubd{ctx: ctx, ln: ln, sock: sock, opened: opened, niceArgs: niceArgs, jobs: map[string]*hubJob{}}
	if linger > 0 {
		d.lingerTok = wire.NewToken()
		d.linger = min(linger, maxLinger)
		d.takeUntil = time.Now().Add(maxLinger)
	}
	first := d.addJob(root, allow, 1) // stdin, started below
	first.dp = dp
	banner := d.banner(first, d.lingerTok)
	if dp != nil {
		defer dp.Close()
		banner.Offer = dp.Offer().String()
	}
	if _, err := fmt.Fprintln(stdout, banner); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		var err error
		if dp != nil {
			_, err = io.Copy(io.Discard, stdin) // held open by the sender until it is done
		} else {
			err = first.hub.Serve(ctx, stdin, stdout)
		}
		d.end(first)
		if d.lingerTok != "" {
			detachStdio() // sshd may close the session; the agent lingers
		}
		errc <- err
	}()
	if dp != nil {
		go func() {
			for {
				c, _, err := dp.Accept()
				if err != nil || !d.serve(first, c, c, c) {
					return
				}
			}
		}()
	}
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.closeLocked()
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.handle(c)
		}()
	}
	d.wg.Wait()
	if err := <-errc; err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return first.err
}

// hubd is the agent's set of jobs: one per sender run, each with its own
// receiver and its streams.
type hubd struct {
	ctx      context.Context
	ln       net.Listener
	sock     string
	opened   func(*extract.Receiver)
	niceArgs string // this process's --nice/--io-nice: a new job must ask for the same

	// lingerTok is the token a new job proves it holds ("" if the agent
	// ends with its job): each NEW2 that proves it gets a fresh one, and
	// the one it used works no more.
	lingerTok string
	linger    time.Duration // how long to wait for a new job once none runs
	takeUntil time.Time     // no new job after this: maxLinger after the agent started

	mu     sync.Mutex
	jobs   map[string]*hubJob
	idle   *time.Timer
	closed bool // no new job or stream is taken
	wg     sync.WaitGroup
}

type hubJob struct {
	token string
	id    string // jobID(token): how a joining stream names the job
	hub   *stream.Hub
	dp    *dataplane.Listener
	open  int   // streams being served; at 0 the job is over
	err   error // the first error of a stream
}

// banner is the agent's banner for job j, with the linger token
// lingerTok (if not ""): on the stdin job's stdout, and to a NEW2 that
// proved itself.
func (d *hubd) banner(j *hubJob, lingerTok string) wire.AgentBannerFields {
	return wire.AgentBannerFields{Sock: d.sock, Job: j.token, Linger: lingerTok}
}

// addJob adds a job with open streams (about to be served), receiving
// under the policy allow, or returns nil if the agent is ending.
func (d *hubd) addJob(root string, allow allowFlags, open int) *hubJob {
	tok := wire.NewToken()
	j := &hubJob{token: tok, id: wire.JobID(tok), hub: &stream.Hub{Root: root, Version: version, Opened: d.opened, Policy: allow.policy(agentHint)}, open: open}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.jobs[j.token] = j
	if d.idle != nil {
		d.idle.Stop()
		d.idle = nil
	}
	return j
}

// serve serves one more stream of job j, unless the job is over.
func (d *hubd) serve(j *hubJob, r io.Reader, w io.Writer, c io.Closer) bool {
	d.mu.Lock()
	if j.open == 0 || d.closed {
		d.mu.Unlock()
		c.Close()
		return false
	}
	j.open++
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		d.run(j, r, w, c)
	}()
	return true
}

// run serves one stream of job j, whose count it already holds, and ends
// it.
func (d *hubd) run(j *hubJob, r io.Reader, w io.Writer, c io.Closer) {
	defer d.end(j)
	defer c.Close()
	defer context.AfterFunc(d.ctx, func() { c.Close() })() // stopped: see interruptible
	if err := j.hub.Serve(d.ctx, r, w); err != nil {
		d.mu.Lock()
		if j.err == nil {
			j.err = err
		}
		d.mu.Unlock()
	}
}

// end ends one stream of job j. The job ends with its last stream; the
// agent with its last job, or, lingering, after linger without a new one.
func (d *hubd) end(j *hubJob) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j.open--; j.open > 0 {
		return
	}
	delete(d.jobs, j.token)
	if j.dp != nil {
		j.dp.Close()
	}
	if len(d.jobs) > 0 {
		return
	}
	wait := min(d.linger, time.Until(d.takeUntil))
	if d.lingerTok == "" || wait <= 0 {
		d.closeLocked()
		return
	}
	d.idle = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.jobs) == 0 {
			d.closeLocked()
		}
	})
}

func (d *hubd) closeLocked() {
	d.closed = true
	d.ln.Close()
}

// newJob is the request of a later run for a job of its own.
type newJob struct {
	Root   string        `json:"root"`
	Linger time.Duration `json:"linger"`            // from now on; 0 ends the agent with this job
	Nice   string        `json:"nice"`              // the --nice/--io-nice the agent would be started with
	SrcIDs string        `json:"src_ids,omitempty"` // as --src-ids
	// Allow is the job's receive policy, as the --allow-* flags give it
	// to a new agent: the run that asks is its own user, as trusted as
	// the command line (the token proves it).
	Allow allowFlags `json:"allow"`
}

// handle proves the hub to a socket connection, has the connection prove
// itself (see proveToHub for the sender's side), and serves it: a stream
// joining a running job (JOIN2), or a new job (NEW2) whose first stream it
// is. A connection that does not prove it holds the key gets nothing.
func (d *hubd) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, wire.HubMaxLine)
	var j *hubJob
	verb, key, ok := wire.AcceptHub(c, br, func(verb, id string) (string, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if verb == wire.HubJoin {
			for _, job := range d.jobs {
				if job.id == id {
					j = job
					return job.token, ""
				}
			}
			return "", "no such job"
		}
		if d.lingerTok == "" || d.closed || !time.Now().Before(d.takeUntil) {
			return "", "not lingering"
		}
		return d.lingerTok, ""
	})
	if !ok {
		return
	}
	if verb == wire.HubJoin {
		c.SetDeadline(time.Time{})
		d.serve(j, br, c, c)
		return
	}
	// The linger token is used up: the next job needs the one this job
	// gets (in its banner), and two jobs cannot both have used one.
	d.mu.Lock()
	used := d.lingerTok != key
	next := wire.NewToken()
	if !used {
		d.lingerTok = next
	}
	d.mu.Unlock()
	if used {
		wire.RefuseHub(c, "the linger token was just used by another job")
		return
	}
	line, err := wire.ReadHubLine(br)
	if err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	var req newJob
	why := ""
	switch {
	case json.Unmarshal([]byte(line), &req) != nil || req.Root == "":
		why = "bad request"
	case req.Nice != d.niceArgs:
		why = fmt.Sprintf("this agent runs with %q, the job asks for %q", d.niceArgs, req.Nice)
	}
	if why == "" {
		if root, err := agentRoot(req.Root, req.SrcIDs); err != nil {
			why = err.Error()
		} else if j = d.addJob(root, req.Allow, 1); j == nil { // this connection, served below
			why = "ending"
		}
	}
	if why != "" {
		wire.RefuseHub(c, why)
		return
	}
	d.mu.Lock()
	d.linger = min(req.Linger, maxLinger)
	d.mu.Unlock()
	if _, err := fmt.Fprintln(c, d.banner(j, next)); err != nil {
		d.end(j)
		c.Close()
		return
	}
	d.run(j, br, c, c)
}

// agentHint names the agent's flag that allows option: the sender's flag
// of the same meaning gives it.
var agentHint = flagHint("agent ")

// maxLinger caps --linger, and how long after it started an agent takes
// new jobs: an agent nobody uses must not stay for ever, nor one that each
// job renews (it then ends with its last job, and the next push starts a
// new one, with new tokens).
const maxLinger = 24 * time.Hour

// detachStdio points the agent's standard streams at /dev/null once its
// SSH session is over, so that sshd can close the session while the agent
// lingers, and a later write cannot kill it with SIGPIPE.
func detachStdio() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer null.Close()
	for fd := range 3 {
		syscall.Dup2(int(null.Fd()), fd)
	}
}

// serveReceiverMetrics exports a receiver's metrics on addr (if set),
// saying where on stderr; who names the command in messages.
func serveReceiverMetrics(ctx context.Context, m *metrics.Receiver, addr, who string, stderr io.Writer) error {
	if addr == "" {
		return nil
	}
	at, err := metrics.Serve(ctx, addr, m.Registry(version))
	if err != nil {
		errorf(stderr, "%s: %v", who, err)
		return err
	}
	errorf(stderr, "%s: metrics on %s", who, metricsAt(addr, at))
	return nil
}
