// Package agentd is the agent: the daemon that receives a push on the
// destination host (`bulkmove --agent ROOT`). The sender starts it over SSH
// (or as a local process) and it serves the job's streams there, each with
// the receiving hub (package receive) over one shared receiver
// (receive/extract); with a linger time it stays between jobs, for a later
// push of the same user to reach without a login shell or a new process.
//
// It sits on the receiving side: it imports the receiver, the wire, the
// data plane's listener and internal/rundir, and nothing of the sending
// side. cmd/bulkmove turns the agent's flags into a Config and calls Run.
//
// # What it trusts and refuses
//
// The agent runs as the user the sender logged in as, and trusts the
// process that started it (its standard input and output: the sender's own
// SSH session) as that user. Everything else is proved first:
//
//   - Its socket (Config.Streams > 0) is made in this user's private
//     directory (internal/rundir), so no other user can connect to it, nor
//     make its path again once the agent is gone. Each connection proves it
//     holds the job's token (wire.HubJoin) or the linger token
//     (wire.HubNew), after the agent proved it holds it too
//     (wire.AcceptHub); one that does not is refused and gets nothing.
//   - Each job's receive policy (what its sender may ask to keep beyond
//     data, names, modes and times: Config.Allow, or a new job's request)
//     is this side's: a Hello that asks for more is refused, or, for
//     owners, not heeded.
//   - A ROOT that overlaps the sender's source on this same machine is
//     refused (Config.CheckRoot), with one wire.Refused line in place of
//     the banner.
//   - With a data plane (Config.Data), K connections are taken, each
//     presenting the one-time token of the banner's offer, over TLS with
//     the certificate the banner pins (see transport/dataplane).
//   - A linger token serves one new job: each job gets the next, and the
//     agent takes new jobs for at most MaxLinger after it started.
//
// Its banner names no program to run: what a sender runs on this host is
// its own choice.
package agentd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/rundir"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
)

// Config is what an agent serves and how (the agent's flags).
type Config struct {
	// Root is where the first job writes (ROOT), made if missing.
	Root string
	// SrcIDs is the sender's SRC by device and inode, with its machine
	// (--src-ids): given to CheckRoot.
	SrcIDs string
	// CheckRoot resolves a job's ROOT, refusing one that overlaps the
	// sender's SRC (srcIDs) on this machine; nil takes ROOT as given.
	CheckRoot func(root, srcIDs string) (string, error)
	// Streams is the job's stream count K (--hub K): the first on stdin
	// and stdout, the others joining on the agent's socket. 0: stdin and
	// stdout alone, with no banner and no socket.
	Streams int
	// Data, if set (dataplane.TLS or TCP), takes the K streams on a port
	// of DataPorts on DataAddr (default: the address SSH reached this host
	// on) instead; stdin is then held open by the sender until it is done.
	Data      dataplane.Mode
	DataPorts string
	DataAddr  string
	// Linger keeps the agent that long after its last job ends, taking
	// new jobs on its socket (at most MaxLinger).
	Linger time.Duration
	// Allow is the first job's receive policy (the --allow-* flags).
	Allow wire.Allow
	// Nice is this process's --nice/--io-nice, as flags: a new job must
	// ask for the same.
	Nice string
	// Version is this bulkmove's version, said in the handshake.
	Version string
	// Opened is called with each job's receiver, once opened (metrics).
	Opened func(*extract.Receiver)
}

// MaxLinger caps Config.Linger, and how long after it started an agent
// takes new jobs: an agent nobody uses must not stay for ever, nor one that
// each job renews (it then ends with its last job, and the next push
// starts a new one, with new tokens).
const MaxLinger = 24 * time.Hour

// UsageError is a Config the agent does not run with, or a ROOT it
// refuses: the caller's to fix (its flags), not a failure of the job.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Run serves the agent's job (and, lingering, the jobs after it) until
// every job has ended and no new one came, or ctx is done; stdin and
// stdout are the first stream (or, with a data plane, held open by the
// sender until it is done). A ROOT refused, or no private directory for
// the socket, is said on stdout in place of the banner (wire.Refused),
// for the sender to show. It returns the first error of the first job.
func Run(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer) error {
	root, err := cfg.root(cfg.Root, cfg.SrcIDs)
	if err != nil {
		// One line in place of the banner: the sender shows it and stops.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		return &UsageError{err}
	}
	if cfg.Data != "" && (cfg.Streams < 1 || cfg.Data != dataplane.TLS && cfg.Data != dataplane.TCP) {
		return &UsageError{fmt.Errorf("--data %q: want tls or tcp, with --hub", cfg.Data)}
	}
	if cfg.Linger > 0 && (cfg.Streams < 1 || cfg.Data != "") {
		return &UsageError{errors.New("--linger needs --hub, and no --data")}
	}
	growPipes(stdin, stdout)
	stdin = interruptible(ctx, stdin)
	if cfg.Streams < 1 {
		hub := &receive.Hub{Root: root, Version: cfg.Version, Opened: cfg.Opened, Policy: policy(cfg.Allow)}
		err = hub.Serve(ctx, stdin, stdout)
	} else {
		err = serve(ctx, cfg, root, stdin, stdout)
	}
	if err != nil && ctx.Err() != nil { // its streams were cut under their reads
		err = receive.Stopped(ctx)
	}
	return err
}

// root resolves a job's ROOT (see Config.CheckRoot).
func (cfg *Config) root(root, srcIDs string) (string, error) {
	if cfg.CheckRoot == nil {
		return root, nil
	}
	return cfg.CheckRoot(root, srcIDs)
}

// policy is a job's receive policy, each option allowed by the agent's
// flag of the same name (which the sender's flag of the same meaning
// gives).
func policy(a wire.Allow) extract.Policy {
	// An absolute --backup-dir anywhere the agent's user may write: its
	// sender logged in as that user.
	return extract.Policy{Owner: a.Owner, Setid: a.Setid, Xattrs: a.Xattrs, ACLs: a.ACLs, Devices: a.Devices, AbsBackupDir: extract.AnyBackupDir,
		Hint: func(option string) string { return wire.CmdAgent + " --allow-" + option }}
}

// interruptible returns r, read by a goroutine of its own, so that a read
// waiting on it ends once ctx is done (SIGTERM or SIGINT): a read of a
// pipe from sshd cannot be cut otherwise, and an agent whose sender went
// quiet outlived a kill until its session closed. The stream then fails
// (its batch in flight is aborted, leaving nothing) and the agent exits.
//
// The goroutine reads up to aheadBufs chunks of aheadChunk bytes ahead of
// the stream's reader, which stops to hash and write: sshd writes into
// its pipe or socket only what fits there and keeps the rest in a buffer
// of its own that it moves for every packet that arrives, which cost it
// more CPU than the receiving. Read ahead, what the sender's SSH window
// lets through waits here instead, copied once.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	a := &ahead{full: make(chan []byte, aheadBufs), free: make(chan []byte, aheadBufs), done: make(chan struct{})}
	for range aheadBufs {
		a.free <- nil
	}
	// Once fill is over, Read no longer waits on it: the hook is dropped,
	// so that a lingering agent's context does not hold every joined
	// stream's buffers until it ends.
	stop := context.AfterFunc(ctx, a.close)
	go func() {
		a.fill(r)
		stop()
	}()
	return a
}

// How far interruptible reads ahead: the 2 MiB of OpenSSH's channel window.
const (
	aheadChunk = 256 << 10
	aheadBufs  = 8
)

// ahead is interruptible's reader.
type ahead struct {
	full, free chan []byte   // chunks read, and buffers to read into
	done       chan struct{} // closed by close
	once       sync.Once
	err        error // fill's, read after full is closed
	cur, buf   []byte
}

func (a *ahead) close() { a.once.Do(func() { close(a.done) }) }

func (a *ahead) fill(r io.Reader) {
	defer close(a.full)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		if b == nil {
			b = make([]byte, aheadChunk)
		}
		n, err := r.Read(b[:aheadChunk])
		if n > 0 {
			select {
			case a.full <- b[:n]:
			case <-a.done:
				return
			}
		}
		if err != nil {
			a.err = err
			return
		}
	}
}

func (a *ahead) Read(p []byte) (int, error) {
	select {
	case <-a.done:
		return 0, io.ErrClosedPipe
	default:
	}
	for len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf[:cap(a.buf)]
			a.buf = nil
		}
		select {
		case <-a.done:
			return 0, io.ErrClosedPipe
		case b, ok := <-a.full:
			if !ok {
				select {
				case <-a.done:
					return 0, io.ErrClosedPipe
				default:
				}
				if a.err == nil || a.err == io.EOF {
					return 0, io.EOF
				}
				return 0, a.err
			}
			a.cur, a.buf = b, b
		}
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// serve serves the job whose first stream is stdin/stdout, and the
// streams joining it on a Unix socket in this user's private directory
// (see rundir.Listen: only this user, or root, can connect, and no one
// else can make the path again once the agent is gone), and, with a data
// plane, up to K streams over TCP or TLS, each presenting the one-time
// token. With a data plane stdin is not a stream: its end (the sender is
// done, or gone) stops new joins.
//
// Every connection to the socket starts with a proof both ways (see
// handle): HubJoin joins a running job (only the sender that read the
// job's token in the banner can, and a second job cannot land in the
// first one's receiver). With Linger the agent outlives its job: for
// Linger after its last job ends it takes HubNew with the linger token, a
// whole new job whose first stream is that connection, so that a later
// pass to the same host reaches it through sshd's forwarding, with no
// login shell and no new process.
func serve(ctx context.Context, cfg Config, root string, stdin io.Reader, stdout io.Writer) error {
	var dp *dataplane.Listener
	if cfg.Data != "" {
		var err error
		if dp, err = dataplane.Listen(cfg.Data, dataplane.Host(cfg.DataAddr), cfg.DataPorts, cfg.Streams); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	ln, sock, err := rundir.Listen("agent")
	if err != nil {
		// One line in place of the banner: the sender shows why.
		fmt.Fprintf(stdout, "%s%v\n", wire.Refused, err)
		if dp != nil {
			dp.Close()
		}
		return fmt.Errorf("agent: %w", err)
	}
	defer ln.Close() // removes the socket
	d := &daemon{ctx: ctx, cfg: cfg, ln: ln, sock: sock, jobs: map[string]*job{}}
	if cfg.Linger > 0 {
		d.lingerTok = wire.NewToken()
		d.linger = min(cfg.Linger, MaxLinger)
		d.takeUntil = time.Now().Add(MaxLinger)
	}
	first := d.addJob(root, cfg.Allow, 1) // stdin, started below
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
			// Held open by the sender until it is done; a control host may
			// ask here for the streams to be dialled from this side.
			err = d.dialOnRequest(first, stdin, stdout)
		} else {
			err = first.hub.Serve(ctx, stdin, stdout)
		}
		d.end(first)
		d.mu.Lock()
		lingering := d.lingerTok != "" // handle rotates it under mu
		d.mu.Unlock()
		if lingering {
			detach() // sshd may close the session; the agent lingers
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

// dialOnRequest reads the agent's stdin until its end, which the sender
// holds open until it is done (with a data plane): a wire.AgentDial line
// there (a remote-to-remote move's control host) opens the job's streams
// from this side to the sender that listens, and answers on stdout. The
// data plane's own port stays open meanwhile: the control host may relay
// to it yet.
func (d *daemon) dialOnRequest(j *job, stdin io.Reader, stdout io.Writer) error {
	br := bufio.NewReader(stdin)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return err
		}
		if req, ok := strings.CutPrefix(line, wire.AgentDial); ok {
			fmt.Fprintln(stdout, d.dial(j, strings.Fields(req)))
		}
	}
}

// dial opens job j's K streams to the sender at f's HOST per its OFFER
// (wire.AgentDial's fields) and serves those that open: its answer.
func (d *daemon) dial(j *job, f []string) string {
	if len(f) != 2 {
		return wire.Refused + "bad dial request"
	}
	o, err := dataplane.ParseOffer(f[1])
	if err != nil {
		return wire.Refused + err.Error()
	}
	k := d.cfg.Streams
	conns := make([]net.Conn, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { conns[i], errs[i] = dataplane.DialSender(d.ctx, f[0], o, i) })
	}
	wg.Wait()
	n := 0
	for _, c := range conns {
		if c != nil && d.serve(j, c, c, c) {
			n++
		}
	}
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	if n == 0 {
		if first == nil {
			first = errors.New("the job is over")
		}
		return wire.Refused + first.Error()
	}
	if n < k && first != nil {
		return fmt.Sprintf("%s%d %v", wire.AgentDialed, n, first)
	}
	return fmt.Sprintf("%s%d", wire.AgentDialed, n)
}

// daemon is the agent's set of jobs: one per sender run, each with its own
// receiver and its streams.
type daemon struct {
	ctx  context.Context
	cfg  Config
	ln   net.Listener
	sock string

	// lingerTok is the token a new job proves it holds ("" if the agent
	// ends with its job): each HubNew that proves it gets a fresh one, and
	// the one it used works no more.
	lingerTok string
	linger    time.Duration // how long to wait for a new job once none runs
	takeUntil time.Time     // no new job after this: MaxLinger after the agent started

	mu     sync.Mutex
	jobs   map[string]*job
	idle   *time.Timer
	closed bool // no new job or stream is taken
	wg     sync.WaitGroup
}

// job is one sender run's receiver and its streams.
type job struct {
	token string
	id    string // wire.JobID(token): how a joining stream names the job
	hub   *receive.Hub
	dp    *dataplane.Listener
	open  int   // streams being served; at 0 the job is over
	err   error // the first error of a stream
}

// banner is the agent's banner for job j, with the linger token
// lingerTok (if not ""): on the stdin job's stdout, and to a HubNew that
// proved itself.
func (d *daemon) banner(j *job, lingerTok string) wire.AgentBannerFields {
	return wire.AgentBannerFields{Sock: d.sock, Job: j.token, Linger: lingerTok}
}

// addJob adds a job with open streams (about to be served), receiving
// under the policy allow, or returns nil if the agent is ending.
func (d *daemon) addJob(root string, allow wire.Allow, open int) *job {
	tok := wire.NewToken()
	j := &job{token: tok, id: wire.JobID(tok), open: open,
		hub: &receive.Hub{Root: root, Version: d.cfg.Version, Opened: d.cfg.Opened, Policy: policy(allow)}}
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
func (d *daemon) serve(j *job, r io.Reader, w io.Writer, c io.Closer) bool {
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
func (d *daemon) run(j *job, r io.Reader, w io.Writer, c io.Closer) {
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
func (d *daemon) end(j *job) {
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

func (d *daemon) closeLocked() {
	d.closed = true
	d.ln.Close()
}

// handle proves the agent to a socket connection, has the connection
// prove itself (see wire.ProveToHub for the sender's side), and serves it:
// a stream joining a running job (HubJoin), or a new job (HubNew) whose
// first stream it is. A connection that does not prove it holds the key
// gets nothing.
func (d *daemon) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, wire.HubMaxLine)
	var j *job
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
		d.serve(j, interruptible(d.ctx, br), c, c)
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
	var req wire.NewJob
	why := ""
	switch {
	case json.Unmarshal([]byte(line), &req) != nil || req.Root == "":
		why = "bad request"
	case req.Nice != d.cfg.Nice:
		why = fmt.Sprintf("this agent runs with %q, the job asks for %q", d.cfg.Nice, req.Nice)
	}
	if why == "" {
		if root, err := d.cfg.root(req.Root, req.SrcIDs); err != nil {
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
	d.linger = min(req.Linger, MaxLinger)
	d.mu.Unlock()
	if _, err := fmt.Fprintln(c, d.banner(j, next)); err != nil {
		d.end(j)
		c.Close()
		return
	}
	d.run(j, br, c, c)
}

// detach is detachStdio, but in tests, whose standard streams stay.
var detach = detachStdio

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
