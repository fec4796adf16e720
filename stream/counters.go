package stream

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
)

// Counters are one stream's running totals. The hot path updates them
// with atomics; the metrics exporter and the bottleneck verdict read them.
// Times are in nanoseconds.
type Counters struct {
	BytesSent atomic.Int64 // file data sent (or copied, locally)
	FilesSent atomic.Int64
	Batches   atomic.Int64 // batches acknowledged
	Retries   atomic.Int64 // batches sent again after a failure

	ReadNanos atomic.Int64 // reading the source files
	SendNanos atomic.Int64 // blocked writing to the connection (socket full)
	WaitNanos atomic.Int64 // window full: waiting for the receiver's answers
	IdleNanos atomic.Int64 // nothing to send: waiting for the walk

	WireBytes atomic.Int64 // everything written to the connection: frames, tar, compressed data
	// SendfileBytes is the file data of WireBytes that went from the page
	// cache to the socket by sendfile (sendfile.go).
	SendfileBytes atomic.Int64
	// Compression (--compress): the tar bytes of the batches sent
	// compressed, and the bytes they took on the wire.
	CompressIn  atomic.Int64
	CompressOut atomic.Int64
	Compressing atomic.Bool // the stream's last batch went compressed

	// As the receiver reports them in its acknowledgements.
	RecvBytes      atomic.Int64
	RecvFiles      atomic.Int64
	RecvWriteNanos atomic.Int64
	RecvFsyncNanos atomic.Int64
	RecvCPUNanos   atomic.Int64 // the receiving process's CPU time (a gauge)
	// RecvLatency is the receiver's filesystem latency per operation, as
	// it measures it (a gauge, nanoseconds).
	RecvLatency atomic.Int64
	// RecvProcess names the receiving process; streams with the same
	// name share it (and its CPU time).
	RecvProcess atomic.Pointer[string]

	Active atomic.Bool // the stream is connected and working
}

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
