package send

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/metrics"
)

// Counters are one stream's running totals: the pool and the connections
// update them, and package metrics, which defines them, exports them
// (metrics imports neither end; the ends report into it).
type Counters = metrics.Stream

// Receiving is implemented by connections that know which process
// receives them.
type Receiving interface {
	ReceiverProcess() string
}

// Counted is implemented by connections that account their time.
type Counted interface {
	SetCounters(*Counters)
}

// Limited is implemented by connections that pace what they send by a
// bucket shared with the other streams of the job (Pool.Limit).
type Limited interface {
	SetLimit(*ratelimit.Bucket)
}

// timedWriter accounts the time spent blocked in writes to the connection.
// It also records when bytes last moved (for the stall watch), writing in
// chunks so that a slow but moving connection is not taken for a stalled
// one.
//
// With a limit, each chunk first waits its turn in the job's bucket (that
// time counts as blocked sending). At a low rate the chunks are smaller, a
// sixteenth of a second's worth, and each turn counts as activity, so that
// a stream waiting its turn is not taken for a stalled one.
type timedWriter struct {
	w        io.Writer
	ctr      *atomic.Pointer[Counters]
	activity *atomic.Int64
	limit    *atomic.Pointer[ratelimit.Bucket]
}

func (t *timedWriter) Write(p []byte) (int, error) {
	c := t.ctr.Load()
	var lim *ratelimit.Bucket
	if t.limit != nil {
		lim = t.limit.Load()
	}
	start := time.Now()
	n := 0
	for n < len(p) {
		size := 64 << 10
		if r := lim.Rate(); r > 0 {
			size = int(min(max(r/16, 512), 64<<10)) // a sixteenth of a second's worth
		}
		chunk := p[n:min(len(p), n+size)]
		if lim != nil {
			lim.Wait(len(chunk))
			if t.activity != nil {
				t.activity.Store(time.Now().UnixNano())
			}
		}
		m, err := t.w.Write(chunk)
		n += m
		if c != nil {
			c.WireBytes.Add(int64(m))
		}
		if t.activity != nil {
			t.activity.Store(time.Now().UnixNano())
		}
		if err != nil {
			if c != nil {
				c.SendNanos.Add(int64(time.Since(start)))
			}
			return n, err
		}
	}
	if c != nil {
		c.SendNanos.Add(int64(time.Since(start)))
	}
	return n, nil
}

// readCounter counts what a stream reads from its connection (the
// receiver's frames), for --stats' bytes received; the handshake, read
// before the pool sets the counters, is not counted.
type readCounter struct {
	r   io.Reader
	ctr *atomic.Pointer[Counters]
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if ctr := c.ctr.Load(); ctr != nil && n > 0 {
		ctr.WireRead.Add(int64(n))
	}
	return n, err
}
