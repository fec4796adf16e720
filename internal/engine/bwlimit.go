package engine

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/iocount"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/internal/units"
)

// bwControl is the job's bandwidth limit: one adjustable token bucket that
// every stream draws from (so K streams share the rate, rather than each
// taking RATE/K), set by --bwlimit, a rate or a timetable run for the
// length of the job, and changed while the job runs:
//
//   - SIGUSR1 halves the rate (never below 1 KiB/s); with no limit in
//     force, it limits the job to half the rate it moved at over the last
//     10 seconds, so "kill -USR1" means "take half as much" either way;
//   - SIGUSR2 doubles the rate; with no limit in force it does nothing;
//   - PUT /bwlimit on the metrics listener sets it (a body like 50M, or
//     off), GET /bwlimit shows it.
//
// A change by hand holds until the timetable's next change, if there is one.
type bwControl struct {
	b     *ratelimit.Bucket
	sched *ratelimit.Schedule // nil: no --bwlimit
	moved func() int64        // bytes moved so far, for the rate SIGUSR1 halves from no limit
	sigs  chan os.Signal
	in    atomic.Int64 // bytes read through reader (a pull), the default moved

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

// minHalved is as low as SIGUSR1 takes the rate.
const minHalved = 1 << 10

// newBwControl makes the bucket, at the rate sched gives now (no limit if
// sched is nil), and takes SIGUSR1 and SIGUSR2 from now on (they would
// end the process otherwise); start acts on them. moved nil counts what
// reader lets through.
func newBwControl(sched *ratelimit.Schedule, moved func() int64) *bwControl {
	var rate int64
	if sched != nil {
		rate = sched.At(time.Now())
	}
	c := &bwControl{b: ratelimit.NewAdjustable(rate), sched: sched, moved: moved, sigs: make(chan os.Signal, 8)}
	if c.moved == nil {
		c.moved = c.in.Load
	}
	signal.Notify(c.sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	return c
}

// start runs the timetable, the signals and the sampling of the rate until
// ctx ends or stop; logf reports each change of the limit.
func (c *bwControl) start(ctx context.Context, logf func(format string, args ...any)) {
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
			case s := <-c.sigs:
				if s == syscall.SIGUSR1 {
					c.halve()
				} else {
					c.double()
				}
			}
		}
	})
}

// stop ends what start started and gives the signals back.
func (c *bwControl) stop() {
	signal.Stop(c.sigs)
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// reader paces r by the job's bucket, counting what it lets through.
func (c *bwControl) reader(r io.Reader) io.Reader {
	return ratelimit.Reader(&iocount.SharedReader{R: r, N: &c.in}, c.b)
}

func (c *bwControl) sample(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, bwSample{now, c.moved()})
	for len(c.samples) > 1 && now.Sub(c.samples[1].at) >= 10*time.Second {
		c.samples = c.samples[1:]
	}
}

// measured is the rate moved over the last 10 s (0 over less than half a
// second).
func (c *bwControl) measured() int64 {
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

func (c *bwControl) halve() {
	r := c.b.Rate()
	if r == 0 {
		r = c.measured()
		if r/2 < minHalved {
			c.logf("SIGUSR1: no bandwidth limit, and too little moved over the last 10 s to halve; left without one (set one with PUT /bwlimit)")
			return
		}
		c.set(r/2, fmt.Sprintf("SIGUSR1: half the %s moved over the last 10 s", units.Rate(r)))
		return
	}
	c.set(max(r/2, min(r, minHalved)), "SIGUSR1")
}

func (c *bwControl) double() {
	r := c.b.Rate()
	switch {
	case r == 0:
		c.logf("SIGUSR2: no bandwidth limit to double")
	case r > math.MaxInt64/2:
		c.logf("SIGUSR2: the bandwidth limit %s cannot double", rateHuman(r))
	default:
		c.set(2*r, "SIGUSR2")
	}
}

func (c *bwControl) set(rate int64, why string) {
	c.b.SetRate(rate)
	c.report(rate, why)
}

func (c *bwControl) report(rate int64, why string) {
	if c.logf != nil {
		c.logf("bandwidth limit %s (%s)", rateHuman(rate), why)
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
func (c *bwControl) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPut:
		body, err := io.ReadAll(io.LimitReader(r.Body, 256))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rate, err := units.ParseRate(strings.TrimSpace(string(body)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.set(rate, "PUT /bwlimit from "+r.RemoteAddr)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		http.Error(w, "GET shows the bandwidth limit, PUT sets it (a body like 50M, or off)", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, rateText(c.b.Rate()))
}

// limit sets up the job's limits: --max-read-rate on the source, and the
// bandwidth limit of the streams (j.bw, also in the metrics). It returns
// the function that ends the bandwidth control.
func (j *job) limit(p *plan) func() {
	p.src.Limit = ratelimit.New(int64(j.flags.Gentle.MaxReadRate))
	j.bw = newBwControl(j.flags.Gentle.BwLimit.sched, j.m.SentBytes)
	j.m.Limit = j.bw.b
	return j.bw.stop
}
