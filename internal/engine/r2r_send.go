package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/sshx"
)

// A move from one remote host to another (bulkmove box1:/src box2:/dst
// on a control host) runs its sender on box1: bulkmove --r2r-send, started
// by the control host over SSH, which walks SRC and pushes it to DEST the
// way the control host tells it on stdin (r2rPath): to the agent the
// control host started on box2 (its data plane, directly or through a
// relay), or over box1's own SSH to box2. Its stdout carries the job's
// own (the --json events, -i lines, --stats) and, marked with r2rMark,
// the lines only the control host reads: hello, the answer to each path
// it was told, and the progress (progressline.Job, in JSON).

// r2rMark starts a line of box1's stdout that is for the control host
// only. Nothing else the job writes there holds a NUL: its lines are
// escaped text or JSON.
const r2rMark = "\x00r2r "

// r2rPath is one way to reach DEST that the control host tells box1, one
// JSON line on its stdin. The offer (the token, the certificate's
// fingerprint) travels only this way: never on box1's command line or
// disk.
//
// "listen" asks box1 to listen for box2's agent to dial it (box1 answers
// "listening HOST OFFER", HOST "-" for all its addresses), where only
// that direction is open; "accept" then says the agent opened Streams
// streams to it, which the job takes. Any other line drops the listener.
type r2rPath struct {
	Via     string `json:"via"`               // "tls" (an agent's data plane), "listen", "accept", "ssh" (box1 pushes over its own SSH) or "none"
	Dest    string `json:"dest"`              // DEST, HOST:PATH as the command line named it
	Host    string `json:"host,omitempty"`    // tls: the address to dial
	Name    string `json:"name,omitempty"`    // tls, accept: the host as messages name it
	Offer   string `json:"offer,omitempty"`   // tls: the agent's offer (dataplane.Offer's String)
	Ports   string `json:"ports,omitempty"`   // listen: the port range to listen on (--data-ports)
	Streams int    `json:"streams,omitempty"` // accept: how many streams the agent opened
	Why     string `json:"why,omitempty"`     // none: why no path works, the job's error

	ln *dataplane.Listener // accept: where the agent's streams come in
}

// r2rProbeTimeout bounds the test of whether box1 reaches a data plane:
// a firewall that drops is waited for this long before the next path.
var r2rProbeTimeout = 5 * time.Second

// R2RSender is bulkmove --r2r-send: box1's end of a remote-to-remote move.
// Stdout takes whole lines (the caller serialises the job's writes with
// Progress's).
type R2RSender struct {
	Config   Config
	Src, Dst string
	Stdin    io.Reader
	Stdout   io.Writer
	Stderr   io.Writer
	ExitCode func(Outcome) int
	Limit    <-chan throttle.Request
	// Progress, if set, is called once the streams start, as Job.Watch,
	// with a function that sends one progress line to the control host.
	Progress func(m *metrics.Job, send func(progressline.Job)) (stop func())
	// Verify, if set, compares SRC with DEST instead of moving it:
	// "content", or "meta" for metadata only (verify --no-content).
	Verify string
	// Log, if set, sends the control host the job's --log-file lines
	// (one "log" line each) and, at the end, what they counted
	// ("logged", Logged's counts in JSON): its --log-file has them as a
	// push's has.
	Log bool
}

// r2rLogged is Logged's counts as box1 sends them to the control host.
type r2rLogged struct {
	Created, Changed, Deleted, BackedUp, Failed, Bytes int64
}

// r2rLog sends each line the job logs (one a Write) to the control host.
type r2rLog struct{ w io.Writer }

func (l r2rLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	if _, err := fmt.Fprintf(l.w, "%slog %s\n", r2rMark, line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Run tells the control host what SRC is and starts the job at once: it
// walks SRC (and opens the journal) while the control host starts box2's
// agent and the paths it is told are tried, and its streams connect by
// the first that does. The control host's lines on stdin steer it: a
// path, "drain" (a graceful stop), or the end of stdin (a stop at once).
func (s R2RSender) Run(ctx context.Context) Outcome {
	kind := "dir"
	if _, fi, err := paths.ResolveSrc(s.Src); err == nil && !fi.IsDir() {
		kind = "file"
	}
	fmt.Fprintf(s.Stdout, "%shello %s\n", r2rMark, kind)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	drain := make(chan struct{})
	chosen := make(chan r2rChosen, 1)
	limit := make(chan throttle.Request, r2rAsksQueue)
	go s.steer(ctx, cancel, drain, chosen, limit)
	j := Job{Config: s.Config, Src: s.Src, Dst: s.Dst, Stdin: strings.NewReader(""), Stdout: s.Stdout, Stderr: s.Stderr,
		ExitCode: s.ExitCode, Drain: drain, Limit: s.asks(ctx, limit)}
	j.await = func(ctx context.Context) (r2rPath, error) {
		select {
		case c := <-chosen:
			return c.path, c.err
		case <-ctx.Done():
			return r2rPath{}, ctx.Err()
		}
	}
	if s.Progress != nil {
		j.Watch = func(m *metrics.Job) func() {
			return s.Progress(m, func(r progressline.Job) {
				b, _ := json.Marshal(statusOf(r, m))
				fmt.Fprintf(s.Stdout, "%sprogress %s\n", r2rMark, b)
			})
		}
	}
	if s.Log {
		j.Log, j.Logged = r2rLog{s.Stdout}, &Logged{}
		defer func() {
			var n r2rLogged
			n.Created, n.Changed, n.Deleted, n.BackedUp, n.Failed, n.Bytes = j.Logged.Totals()
			b, _ := json.Marshal(n)
			fmt.Fprintf(s.Stdout, "%slogged %s\n", r2rMark, b)
		}()
	}
	if s.Verify != "" {
		return j.Verify(ctx, s.Verify == "content")
	}
	return j.Run(ctx)
}

// r2rStatus is a progress line of box1's for the control host: the
// progress line's figures, which it draws, and the job's counts and each
// stream's, with box1's bottleneck verdict, which its metrics
// (--metrics-addr, --metrics-textfile, --pushgateway) take. A field an
// older box1 does not send reads as zero.
type r2rStatus struct {
	progressline.Job
	PlannedFiles, DoneFiles, Skipped, Failed int64
	Sent                                     []r2rStream
	// The progress line has the bandwidth limit and the verdict's
	// resource; these are the rest of what the exporter shows.
	Target      int64 `json:",omitempty"` // the streams the job aims at
	MoreStreams bool  `json:",omitempty"` // the verdict says one more stream would help
	// -j auto's decisions so far: streams added, removed, and stops.
	Added, Removed, Stopped int64 `json:",omitempty"`
}

// r2rStream is what one of box1's streams did: its series in the
// exporter, times in nanoseconds.
type r2rStream struct {
	Bytes, Files, Batches int64
	// Omitted when zero: the line goes out every r2rEvery.
	Retries, Read, Blocked, Wait, Idle, Wire, CompressIn, CompressOut int64  `json:",omitempty"`
	RecvBytes, RecvFiles, RecvWrite, RecvFsync, RecvCPU               int64  `json:",omitempty"`
	RecvProcess                                                       string `json:",omitempty"`
	Compressing, Active                                               bool   `json:",omitempty"`
}

// statusOf is the progress line r and m's counts, as box1 sends them.
func statusOf(r progressline.Job, m *metrics.Job) r2rStatus {
	st := r2rStatus{Job: r, PlannedFiles: m.PlannedFiles.Load(), DoneFiles: m.DoneFiles.Load(), Skipped: m.Skipped.Load(), Failed: m.Failed.Load(),
		Target: m.AutoJ.Target.Load()}
	if v := m.Verdict(); v != nil {
		st.MoreStreams = v.MoreStreamsHelp
	}
	st.Added, st.Removed, st.Stopped = m.AutoJ.Decisions()
	for _, c := range m.StreamsInUse() {
		s := r2rStream{Bytes: c.BytesSent.Load(), Files: c.FilesSent.Load(), Batches: c.Batches.Load(), Retries: c.Retries.Load(),
			Read: c.ReadNanos.Load(), Blocked: c.SendNanos.Load(), Wait: c.WaitNanos.Load(), Idle: c.IdleNanos.Load(),
			Wire: c.WireBytes.Load(), CompressIn: c.CompressIn.Load(), CompressOut: c.CompressOut.Load(),
			RecvBytes: c.RecvBytes.Load(), RecvFiles: c.RecvFiles.Load(), RecvWrite: c.RecvWriteNanos.Load(), RecvFsync: c.RecvFsyncNanos.Load(),
			RecvCPU: c.RecvCPUNanos.Load(), Compressing: c.Compressing.Load(), Active: c.Active.Load()}
		if p := c.RecvProcess.Load(); p != nil {
			s.RecvProcess = *p
		}
		st.Sent = append(st.Sent, s)
	}
	return st
}

// newMeasure is the control host's measure of a move whose box1 runs up
// to streams streams: the counters exist from the start, since the
// exporter reads them while box1's progress (measure) sets them.
func newMeasure(streams int) *metrics.Job {
	m := metrics.NewJob(streams)
	m.Limit = ratelimit.NewAdjustable(0)
	return m
}

// measure is box1's status st in m (newMeasure's), the control host's
// measure of the move.
func (st r2rStatus) measure(m *metrics.Job) {
	m.PlannedBytes.Store(st.PlannedBytes)
	m.PlannedFiles.Store(st.PlannedFiles)
	m.WalkDone.Store(st.WalkDone)
	m.DoneBytes.Store(st.DoneBytes)
	m.DoneFiles.Store(st.DoneFiles)
	m.Skipped.Store(st.Skipped)
	m.Failed.Store(st.Failed)
	if m.Limit != nil && m.Limit.Rate() != st.Limit {
		m.Limit.SetRate(st.Limit)
	}
	m.AutoJ.Target.Store(st.Target)
	m.AutoJ.SetDecisions(st.Added, st.Removed, st.Stopped)
	res := st.Bottleneck
	if res == "" { // the progress line's word for none known
		res = metrics.Idle
	}
	m.SetVerdict(&metrics.Verdict{Resource: res, MoreStreamsHelp: st.MoreStreams})
	sent := st.Sent[:min(len(st.Sent), len(m.Streams))]
	if len(sent) > 0 {
		m.AutoJ.InUse.Store(int64(len(sent)))
	}
	for i, c := range sent {
		s := m.Streams[i]
		s.BytesSent.Store(c.Bytes)
		s.FilesSent.Store(c.Files)
		s.Batches.Store(c.Batches)
		s.Retries.Store(c.Retries)
		s.ReadNanos.Store(c.Read)
		s.SendNanos.Store(c.Blocked)
		s.WaitNanos.Store(c.Wait)
		s.IdleNanos.Store(c.Idle)
		s.WireBytes.Store(c.Wire)
		s.CompressIn.Store(c.CompressIn)
		s.CompressOut.Store(c.CompressOut)
		s.Compressing.Store(c.Compressing)
		s.RecvBytes.Store(c.RecvBytes)
		s.RecvFiles.Store(c.RecvFiles)
		s.RecvWriteNanos.Store(c.RecvWrite)
		s.RecvFsyncNanos.Store(c.RecvFsync)
		s.RecvCPUNanos.Store(c.RecvCPU)
		if c.RecvProcess != "" {
			if p := s.RecvProcess.Load(); p == nil || *p != c.RecvProcess {
				s.RecvProcess.Store(&c.RecvProcess)
			}
		}
		s.Active.Store(c.Active)
	}
}

// r2rChosen is the path the job's streams take, or why there is none.
type r2rChosen struct {
	path r2rPath
	err  error
}

// asks are the requests to the job's bandwidth limit: those of this
// host (s.Limit, its signals) and those the control host passes on
// (limit: its /bwlimit, its signals), until ctx ends.
func (s R2RSender) asks(ctx context.Context, limit <-chan throttle.Request) <-chan throttle.Request {
	asks := make(chan throttle.Request)
	go func() {
		for {
			var r throttle.Request
			select {
			case <-ctx.Done():
				return
			case r = <-s.Limit: // nil: never
			case r = <-limit:
			}
			select {
			case asks <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return asks
}

// r2rAsksQueue bounds the control host's requests to box1's limit that
// wait for its job to take them; past it the oldest gives way.
const r2rAsksQueue = 16

// steer reads the control host's lines: it tries each path it is told
// and answers, passes the first that connects (or the control host's
// word that none does) to the job, closes drain on "drain", passes the
// control host's requests to the bandwidth limit on limit ("bwlimit
// RATE", bytes a second, 0: none; "halve" and "double", its SIGUSR1 and
// SIGUSR2), and cancels the job at the end of stdin.
func (s R2RSender) steer(ctx context.Context, cancel func(), drain chan struct{}, chosen chan<- r2rChosen, limit chan throttle.Request) {
	br := bufio.NewReader(s.Stdin)
	var once sync.Once
	found := false
	var ln *dataplane.Listener // listening for box2's agent to dial ("listen")
	defer func() {
		if ln != nil && !found {
			ln.Close()
		}
	}()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			cancel()
			return
		}
		if r, ok := limitAsked(line); ok {
			for sent := r.Op < 0; !sent; { // a bad rate: dropped
				select {
				case limit <- r:
					sent = true
				default:
					select { // full: the oldest gives way
					case <-limit:
					default:
					}
				}
			}
			continue
		}
		switch {
		case strings.TrimSpace(line) == "drain":
			once.Do(func() { close(drain) })
			continue
		case found:
			continue
		}
		var p r2rPath
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			p = r2rPath{Via: "none", Why: fmt.Sprintf("bad path from the control host: %v", err)}
		}
		if p.Via == "accept" && ln != nil {
			found = true
			p.ln = ln
			fmt.Fprintf(s.Stdout, "%sgo\n", r2rMark)
			chosen <- r2rChosen{path: p}
			continue
		}
		if ln != nil { // the agent could not dial it: another path
			ln.Close()
			ln = nil
		}
		if p.Via == "none" {
			found = true
			chosen <- r2rChosen{err: errors.New(p.Why)}
			continue
		}
		if p.Via == "listen" {
			var err error
			if ln, err = dataplane.Listen(dataplane.TLS, dataplane.Host(""), p.Ports, s.Config.Jobs); err != nil {
				fmt.Fprintf(s.Stdout, "%sno %s\n", r2rMark, strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			ln.Admit() // the agent dials before the job takes its streams
			host := "-"
			if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsUnspecified() {
				host = a.IP.String()
			}
			fmt.Fprintf(s.Stdout, "%slistening %s %s\n", r2rMark, host, ln.Offer())
			continue
		}
		why, fatal := s.probe(ctx, p)
		if why != nil {
			verb := "no"
			switch {
			case fatal:
				verb = "fail"
			case errors.Is(why, sshx.ErrAuth):
				verb = "nokey" // box2 takes none of box1's keys
			}
			fmt.Fprintf(s.Stdout, "%s%s %s\n", r2rMark, verb, strings.ReplaceAll(why.Error(), "\n", " "))
			continue
		}
		found = true
		fmt.Fprintf(s.Stdout, "%sgo\n", r2rMark)
		chosen <- r2rChosen{path: p}
	}
}

// limitAsked is the request to the bandwidth limit a line of the control
// host's is ("bwlimit RATE", "halve", "double"), if it is one: ok is
// false for any other line; a bad rate is none (ok true, Op -1).
func limitAsked(line string) (r throttle.Request, ok bool) {
	switch line = strings.TrimSpace(line); line {
	case "halve":
		return throttle.Request{Op: throttle.Halve, Why: "SIGUSR1 on the control host"}, true
	case "double":
		return throttle.Request{Op: throttle.Double, Why: "SIGUSR2 on the control host"}, true
	}
	rate, ok := strings.CutPrefix(line, "bwlimit ")
	if !ok {
		return r, false
	}
	n, err := strconv.ParseInt(rate, 10, 64)
	if err != nil || n < 0 {
		return throttle.Request{Op: -1}, true
	}
	return throttle.Request{Op: throttle.Set, Rate: n, Why: "PUT /bwlimit on the control host"}, true
}

// probe says whether box1 reaches DEST by p: why not, and whether that
// ends the move (a host key that changed) rather than calls for the next
// path.
func (s R2RSender) probe(ctx context.Context, p r2rPath) (why error, fatal bool) {
	switch p.Via {
	case "tls":
		o, err := dataplane.ParseOffer(p.Offer)
		if err != nil {
			return err, true
		}
		d := net.Dialer{Timeout: r2rProbeTimeout}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(p.Host, strconv.Itoa(o.Port)))
		if err != nil {
			return err, false
		}
		c.Close()
		return nil, false
	case "ssh":
		t, _, err := sshx.ParseTarget(p.Dest)
		if err != nil {
			return err, true
		}
		opt := s.Config.SSH.options(false)
		opt.Stderr = io.Discard
		c, err := sshx.Dial(ctx, t, opt)
		if err != nil {
			// A host key that changed may be an attack: no other path is
			// tried behind its back.
			return err, errors.Is(err, sshx.ErrHostKeyChanged)
		}
		c.Close()
		return nil, false
	}
	return fmt.Errorf("unknown path %q", p.Via), true
}

// directDest is a DEST reached at an agent's data plane that another
// host started (a remote-to-remote move's box1).
type directDest struct {
	host, name string
	offer      dataplane.Offer
	// ln, if set, is where the agent's streams come in, dialled from its
	// side (the one direction open): streams of them.
	ln      *dataplane.Listener
	streams int
}

// reverseWait bounds the wait for a stream the agent said it opened to
// be admitted (its TLS handshake and greeting run at once).
var reverseWait = 30 * time.Second

// accept is the connection of one of the streams the agent dialled (d.ln):
// the transport's DialConn for such a DEST. The listener closes once all
// of them came, or the wait for one ran out.
func (d *directDest) accept(ctx context.Context, _ string, _ dataplane.Offer, i int) (net.Conn, error) {
	if i >= d.streams {
		return nil, fmt.Errorf("stream %d: the agent on %s opened %d streams", i, d.name, d.streams)
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	got := make(chan accepted, 1)
	go func() {
		c, _, err := d.ln.Accept()
		got <- accepted{c, err}
	}()
	timer := time.NewTimer(reverseWait)
	defer timer.Stop()
	select {
	case a := <-got:
		return a.c, a.err
	case <-timer.C:
	case <-ctx.Done():
	}
	d.ln.Close() // ends the Accept above, and any after
	if a := <-got; a.err == nil {
		return a.c, nil // admitted as the listener closed
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("the agent on %s said it dialled this host, but its stream did not come within %v", d.name, reverseWait)
}
