package throttle

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/iocount"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/internal/units"
)

// Control is a job's bandwidth limit: one adjustable token bucket that
// every stream draws from (so K streams share the rate, rather than each
// taking RATE/K), set by --bwlimit, a rate or a timetable run for the
// length of the job, and changed while the job runs:
//
//   - a Halve request (cmd/bulkmove sends one on SIGUSR1) halves the rate
//     (never below 1 KiB/s); with no limit in force, it limits the job to
//     half the rate it moved at over the last 10 seconds, so "kill -USR1"
//     means "take half as much" either way;
//   - a Double request (SIGUSR2) doubles the rate; with no limit in force
//     it does nothing;
//   - PUT /bwlimit on the metrics listener sets it (a body like 50M, or
//     off), GET /bwlimit shows it (ServeHTTP).
//
// A change by hand holds until the timetable's next change, if there is one.
type Control struct {
	b     *ratelimit.Bucket
	sched *ratelimit.Schedule // nil: no --bwlimit
	moved func() int64        // bytes moved so far, for the rate Halve halves from no limit
	asks  <-chan Request
	in    atomic.Int64 // bytes read through Reader (a pull), the default moved

	logf    func(format string, args ...any) // reports each change; set by start
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []bwSample // moved, once a second, over the last 10 s
}

type bwSample struct {
	at    time.Time
	bytes int64
}

// Request asks the limit in force to halve, double or change while the
// job runs; Why names who asked (SIGUSR1) in what the control reports.
type Request struct {
	Op   Op
	Rate int64 // Set's rate, bytes a second (0: no limit)
	Why  string
}

// Op is what a Request asks.
type Op int

const (
	Halve  Op = iota // half the rate, or half the rate measured if no limit
	Double           // twice the rate, if there is a limit
	Set              // the Request's Rate (a remote-to-remote move's control host asks it of box1)
)

// minHalved is as low as Halve takes the rate.
const minHalved = 1 << 10

// New makes the bucket, at the rate s gives now (no limit if s was not
// set), that Start then steers, acting on the requests asks brings (nil:
// none); until Start they wait in asks. moved nil counts what Reader lets
// through.
func New(s Schedule, moved func() int64, asks <-chan Request) *Control {
	var rate int64
	if s.sched != nil {
		rate = s.sched.At(time.Now())
	}
	c := &Control{b: ratelimit.NewAdjustable(rate), sched: s.sched, moved: moved, asks: asks}
	if c.moved == nil {
		c.moved = c.in.Load
	}
	return c
}

// Bucket is the token bucket the streams draw from.
func (c *Control) Bucket() *ratelimit.Bucket { return c.b }

// Start runs the timetable, the requests and the sampling of the rate
// until ctx ends or Stop; logf reports each change of the limit.
func (c *Control) Start(ctx context.Context, logf func(format string, args ...any)) {
	ctx, c.cancel = context.WithCancel(ctx)
	c.logf = logf
	if c.sched != nil {
		first := true
		c.wg.Go(func() {
			c.sched.Run(ctx, c.b, func(rate int64) {
				if !first { // the first is the rate the bucket started with
					c.report(rate, "timetable")
				}
				first = false
			})
		})
	}
	c.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		c.sample(time.Now())
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				c.sample(now)
			case r := <-c.asks:
				switch r.Op {
				case Halve:
					c.halve(r.Why)
				case Double:
					c.double(r.Why)
				case Set:
					c.set(max(r.Rate, 0), r.Why)
				}
			}
		}
	})
}

// Stop ends what Start started.
func (c *Control) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// Reader paces r by the job's bucket, counting what it lets through.
func (c *Control) Reader(r io.Reader) io.Reader {
	return ratelimit.Reader(&iocount.SharedReader{R: r, N: &c.in}, c.b)
}

func (c *Control) sample(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, bwSample{now, c.moved()})
	for len(c.samples) > 1 && now.Sub(c.samples[1].at) >= 10*time.Second {
		c.samples = c.samples[1:]
	}
}

// measured is the rate moved over the last 10 s (0 over less than half a
// second).
func (c *Control) measured() int64 {
	now, bytes := time.Now(), c.moved()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) == 0 {
		return 0
	}
	first := c.samples[0]
	dt := now.Sub(first.at).Seconds()
	if dt < 0.5 {
		return 0
	}
	return int64(float64(bytes-first.bytes) / dt)
}

func (c *Control) halve(why string) {
	r := c.b.Rate()
	if r == 0 {
		r = c.measured()
		if r/2 < minHalved {
			c.say("%s: no bandwidth limit, and too little moved over the last 10 s to halve; left without one (set one with PUT /bwlimit)", why)
			return
		}
		c.set(r/2, fmt.Sprintf("%s: half the %s moved over the last 10 s", why, units.Rate(r)))
		return
	}
	c.set(max(r/2, min(r, minHalved)), why)
}

func (c *Control) double(why string) {
	r := c.b.Rate()
	switch {
	case r == 0:
		c.say("%s: no bandwidth limit to double", why)
	case r > math.MaxInt64/2:
		c.say("%s: the bandwidth limit %s cannot double", why, rateHuman(r))
	default:
		c.set(2*r, why)
	}
}

func (c *Control) set(rate int64, why string) {
	c.b.SetRate(rate)
	c.report(rate, why)
}

func (c *Control) report(rate int64, why string) {
	c.say("bandwidth limit %s (%s)", rateHuman(rate), why)
}

func (c *Control) say(format string, args ...any) {
	if c.logf != nil {
		c.logf(format, args...)
	}
}

// rateHuman is a rate for people: 4.0 MiB/s, or off.
func rateHuman(r int64) string {
	if r <= 0 {
		return "off"
	}
	return units.Rate(r)
}

// ServeHTTP is /bwlimit: GET shows the limit in force (as rateText writes
// it: 50MiB, off), PUT sets it from the body (a rate as --bwlimit takes it).
func (c *Control) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveLimit(w, r, c.b.Rate, func(rate int64, who string) error {
		c.set(rate, "PUT /bwlimit from "+who)
		return nil
	})
}

// Relay is /bwlimit where the limit is another process's: on a
// remote-to-remote move's control host, box1's sender's, which applies
// it. GET shows the limit that process last reported (Rate), PUT asks it
// for another (Ask, whose error is the answer, 503) and shows that one.
type Relay struct {
	Rate func() int64
	Ask  func(rate int64, who string) error
}

func (l Relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveLimit(w, r, l.Rate, l.Ask)
}

// serveLimit is /bwlimit's protocol over the limit in force (rate) and
// the way to change it (set), who asked given as the client's address.
func serveLimit(w http.ResponseWriter, r *http.Request, rate func() int64, set func(rate int64, who string) error) {
	shown := rate
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPut:
		body, err := io.ReadAll(io.LimitReader(r.Body, 256))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		asked, err := units.ParseRate(strings.TrimSpace(string(body)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := set(asked, r.RemoteAddr); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		shown = func() int64 { return asked }
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		http.Error(w, "GET shows the bandwidth limit, PUT sets it (a body like 50M, or off)", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, rateText(shown()))
}
