package send

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/hostcpu"
	"github.com/bulkmove/bulkmove/internal/iocount"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/send/compress"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// aheadBytes bounds the data of the batches a stream has taken beyond the
// first two and not yet sent: batches it holds are not there for streams
// that -j auto adds, or that finish early. With 64 MiB ranges of a large
// file four ahead were 256 MiB a stream, and four added streams idled the
// last half of a 4 GiB file's copy.
const aheadBytes = 32 << 20

// RemoteError is a fatal error reported by the agent.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return "receiver: " + e.Msg }

// Client is the sending end of one connection to an agent.
type Client struct {
	Name string // for messages, e.g. "box2 stream 3"
	Peer wire.Handshake
	Src  source.Source

	sums   bool // checksum mode: manifests carry content hashes
	ctr    atomic.Pointer[Counters]
	limit  atomic.Pointer[ratelimit.Bucket] // paces what the stream writes; nil: no limit
	w      *bufio.Writer
	closer io.Closer
	frames chan frame
	queued byteGate // the payload bytes of frames read and not yet taken
	once   sync.Once

	// NoIntegrity sends no content hashes: the receiver then does not
	// check what arrived (--no-verify-transfer). Dial sets it from the
	// receive options' NoSums, which tells the receiver so.
	NoIntegrity bool

	// StallTimeout, if set before Run, closes the connection when it has
	// batches in flight and moves no byte either way for that long.
	StallTimeout time.Duration
	activity     atomic.Int64 // unix nanoseconds of the last byte moved
	stalled      atomic.Bool

	// Compress, if set before Run, is how the stream compresses batch
	// data (the zero value: not at all); see package send/compress.
	Compress compress.Config
	// Logf, if set before Run, reports the stream's compression
	// decisions (for -v).
	Logf func(format string, args ...any)
	// PathRTT, if set before Run, measures the network round trip to the
	// receiver (from which a path is far, see compress.FarRTT, and its streams
	// start compressed); nil: a near one. Not the stream handshake's
	// time, which includes the agent opening its receiver: on a busy
	// machine, pipes to a local agent took 10 ms.
	PathRTT func() time.Duration
	// Share, if set before Run, is shared by the streams of one job
	// (--compress auto: see compress.AutoShare).
	Share   *compress.AutoShare
	z       *compress.Stream
	sent    iocount.Writer   // what the stream wrote to the connection
	raw     syscall.RawConn  // a TCP connection's socket (sendfile.go), or nil
	obsAt   time.Time        // when the last batch's data was observed, and then
	obsRecv int64            // the receiver's write time (Counters.RecvWriteNanos)
	obsCPU  int64            // the receiving process's CPU time (Counters.RecvCPUNanos)
	obsHost hostcpu.Snapshot // the host's CPU time
}

// readHost reads this host's CPU time (a variable for tests).
var readHost = hostcpu.Read

// ErrStalled marks a stream closed for moving no bytes while it had work.
var ErrStalled = errors.New("stalled")

type frame struct {
	typ     byte
	payload []byte
	err     error
}

// Dial performs the handshake over rw (an agent's stdin and stdout) and
// starts reading its frames. closer is closed by Close or on failure.
func Dial(ctx context.Context, name string, r io.Reader, w io.Writer, closer io.Closer, version string, opt wire.ReceiveOptions, src source.Source) (*Client, error) {
	c := &Client{Name: name, Src: src, closer: closer, frames: make(chan frame, 4*wire.Window+8), sums: opt.Check == wire.CheckSum, NoIntegrity: opt.NoSums}
	c.sent.W = &timedWriter{w: w, ctr: &c.ctr, activity: &c.activity, limit: &c.limit}
	c.w = bufio.NewWriterSize(&c.sent, 256<<10)
	if tc, ok := w.(*net.TCPConn); ok {
		c.raw, _ = tc.SyscallConn()
	}
	hello := wire.Handshake{Proto: wire.Proto, Version: version, Options: &opt}
	if err := wire.WriteFrame(c.w, wire.Hello, wire.EncodeJSON(hello)); err != nil {
		c.shut()
		return nil, fmt.Errorf("%s: send handshake: %w", name, err)
	}
	if err := c.w.Flush(); err != nil {
		c.shut()
		return nil, fmt.Errorf("%s: send handshake: %w", name, err)
	}
	go c.read(bufio.NewReaderSize(&readCounter{r: r, ctr: &c.ctr}, 64<<10))
	f, err := c.next(ctx)
	if err != nil {
		c.shut()
		if re, ok := err.(*RemoteError); ok {
			// A Fail frame in place of the Hello: the receiver refused
			// the stream, and said why.
			err = &wire.RefusedError{Reason: re.Msg}
		}
		return nil, fmt.Errorf("%s: handshake: %w", name, err)
	}
	if f.typ != wire.Hello {
		c.shut()
		return nil, fmt.Errorf("%s: handshake: %w: got frame %q, want hello", name, wire.ErrProtocol, f.typ)
	}
	if err := wire.DecodeJSON(f.payload, &c.Peer); err != nil {
		c.shut()
		return nil, fmt.Errorf("%s: handshake: %w", name, err)
	}
	if c.Peer.Proto != wire.Proto {
		c.shut()
		return nil, fmt.Errorf("%s: %w: the agent (bulkmove %s) speaks protocol %d, this sender (bulkmove %s) speaks %d; install the same version on both hosts",
			name, wire.ErrVersion, c.Peer.Version, c.Peer.Proto, version, wire.Proto)
	}
	return c, nil
}

// ReceiverProcess implements Receiving.
func (c *Client) ReceiverProcess() string { return c.Peer.Process }

// SetCounters implements Counted.
func (c *Client) SetCounters(ctr *Counters) { c.ctr.Store(ctr) }

// SetLimit implements Limited: everything the stream writes from now on
// (frames, manifests and file data) draws from b.
func (c *Client) SetLimit(b *ratelimit.Bucket) { c.limit.Store(b) }

func (c *Client) read(r *bufio.Reader) {
	defer close(c.frames)
	for {
		typ, p, err := wire.ReadFrame(r)
		c.activity.Store(time.Now().UnixNano())
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("connection closed by the receiver")
			}
			if c.stalled.Load() {
				err = fmt.Errorf("%w: no byte moved for %s with batches in flight", ErrStalled, c.StallTimeout)
			}
			c.frames <- frame{err: err}
			return
		}
		if typ == wire.Fail {
			c.frames <- frame{err: &RemoteError{Msg: string(p)}}
			return
		}
		if !c.queued.take(int64(len(p))) {
			return // shut
		}
		c.frames <- frame{typ: typ, payload: p}
	}
}

// maxQueued bounds the payload bytes of the frames a Client has read and
// not yet taken (beyond the one frame it may always hold): frames are read
// ahead of the stream's loop, and an agent that sends acks of 64 MiB while
// the stream is busy writing must not fill its queue of frames with them.
const maxQueued = 16 << 20

// byteGate counts the bytes of the frames in a Client's queue: the reader
// waits while they would pass maxQueued, until the stream takes some or is
// shut.
type byteGate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	held   int64
	closed bool
}

func (g *byteGate) init() {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
}

// take waits for room for n bytes; false once the gate is closed.
func (g *byteGate) take(n int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	for !g.closed && g.held > 0 && g.held+n > maxQueued {
		g.cond.Wait()
	}
	g.held += n
	return !g.closed
}

func (g *byteGate) give(n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	g.held -= n
	g.cond.Broadcast()
}

func (g *byteGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	g.closed = true
	g.cond.Broadcast()
}

// taken is called for each frame taken from the queue.
func (c *Client) taken(f frame) {
	c.queued.give(int64(len(f.payload)))
}

func (c *Client) next(ctx context.Context) (frame, error) {
	select {
	case <-ctx.Done():
		return frame{}, ctx.Err()
	case f, ok := <-c.frames:
		if !ok {
			return frame{}, fmt.Errorf("connection closed by the receiver")
		}
		c.taken(f)
		return f, f.err
	}
}

func (c *Client) shut() {
	c.once.Do(func() {
		c.queued.close()
		if c.closer != nil {
			c.closer.Close()
		}
	})
}

type inflight struct {
	b       *model.Batch
	m       *wire.BatchManifest
	sent    bool // data sent, waiting for the ack
	srcErrs []source.Error
	need    []bool // the receiver's need list; nil: all
	// blocks are the receiver's block lists of its files that may go as
	// a block delta, by entry, ahead of its need list; deltas, those
	// that went so.
	blocks map[int]*wire.BlockList
	deltas []source.Delta
}

// Run implements Conn.
func (c *Client) Run(ctx context.Context, in <-chan *model.Batch, done func(Result)) ([]*model.Batch, error) {
	return c.run(ctx, in, 0, c.sums, done)
}

// Final implements Conn.
func (c *Client) Final(ctx context.Context, bs []*model.Batch, done func(Result)) error {
	in := make(chan *model.Batch, len(bs))
	for _, b := range bs {
		in <- b
	}
	close(in)
	_, err := c.run(ctx, in, wire.FlagFinal, false, done)
	return err
}

// watch closes the connection if it stalls while inflight reports work;
// it returns a function that stops watching.
func (c *Client) watch(inflight func() bool) func() {
	if c.StallTimeout <= 0 {
		return func() {}
	}
	c.activity.Store(time.Now().UnixNano())
	stop := make(chan struct{})
	tick := min(c.StallTimeout/4, time.Second)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				idle := now.Sub(time.Unix(0, c.activity.Load()))
				if idle >= c.StallTimeout && inflight() {
					c.stalled.Store(true)
					c.shut()
					return
				}
			}
		}
	}()
	return func() { close(stop) }
}

// run sends the batches from in with the given manifest flags (sums: with
// content hashes) and reports each acknowledged batch to done: data
// batches get a need list and then their data, final batches their data at
// once, verify batches an ack alone.
func (c *Client) run(ctx context.Context, in <-chan *model.Batch, flags uint64, sums bool, done func(Result)) (unacked []*model.Batch, err error) {
	var queue []*inflight
	var busy atomic.Bool // batches in flight, for the stall watch
	defer c.watch(busy.Load)()
	defer func() {
		if err != nil {
			for _, f := range queue {
				unacked = append(unacked, f.b)
			}
			if c.stalled.Load() && !errors.Is(err, ErrStalled) {
				err = fmt.Errorf("%w: no byte moved for %s with batches in flight (%v)", ErrStalled, c.StallTimeout, err)
			} else if re := (*RemoteError)(nil); !errors.As(err, &re) && ctx.Err() == nil {
				if re = c.failReason(); re != nil {
					err = fmt.Errorf("%w (%v)", err, re) // classified as before, by how the write failed
				}
			}
			err = fmt.Errorf("%s: %w", c.Name, err)
			c.shut()
		}
	}()
	manifested := 0 // batches whose manifest is sent but not their data
	var ahead int64 // their bytes
	for {
		busy.Store(len(queue) > 0)
		// Keep up to four manifests ahead (two, once they hold aheadBytes)
		// and wire.Window batches in flight.
		var src <-chan *model.Batch
		if in != nil && manifested < 4 && len(queue) < wire.Window && (manifested < 2 || ahead < aheadBytes) {
			src = in
		}
		if len(queue) == 0 && src == nil {
			return nil, c.w.Flush()
		}
		if err := c.w.Flush(); err != nil {
			return nil, err
		}
		waitStart := time.Now()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case b, ok := <-src:
			if ctr := c.ctr.Load(); ctr != nil && len(queue) == 0 {
				ctr.IdleNanos.Add(int64(time.Since(waitStart)))
			}
			if !ok {
				in = nil
				continue
			}
			m := &wire.BatchManifest{ID: b.ID, Flags: flags, Entries: b.Entries, Names: c.Src.OwnerNames(b.Entries)}
			if sums {
				m.Sums = c.Src.Sums(b.Entries)
			}
			var xerrs []source.Error
			if flags&wire.FlagFinal != 0 { // directories' and symlinks' attributes
				m.Xattrs = c.Src.EntryXattrs(b.Entries, func(e source.Error) { xerrs = append(xerrs, e) })
			}
			if err := wire.WriteFrame(c.w, wire.Manifest, wire.EncodeManifest(m)); err != nil {
				return nil, err
			}
			fl := &inflight{b: b, m: m, srcErrs: xerrs}
			queue = append(queue, fl)
			if flags&wire.FlagFinal != 0 {
				// Deferred entries are all applied: the receiver sends
				// no need list, and their "data" follows at once.
				if err := c.sendData(fl, allNeeded(len(b.Entries))); err != nil {
					return nil, err
				}
				continue
			}
			if flags&(wire.FlagVerify|wire.FlagItemize) != 0 {
				fl.sent = true // the receiver answers with the ack alone
				continue
			}
			manifested++
			ahead += b.Bytes
		case f, ok := <-c.frames:
			c.taken(f)
			if ctr := c.ctr.Load(); ctr != nil {
				if src == nil {
					ctr.WaitNanos.Add(int64(time.Since(waitStart)))
				} else if len(queue) == 0 {
					ctr.IdleNanos.Add(int64(time.Since(waitStart)))
				}
			}
			if !ok {
				return nil, errors.New("connection closed by the receiver")
			}
			if f.err != nil {
				return nil, f.err
			}
			switch f.typ {
			case wire.Blocks:
				bl, err := wire.DecodeBlocks(f.payload)
				if err != nil {
					return nil, err
				}
				if err := addBlocks(firstUnsent(queue), bl); err != nil {
					return nil, err
				}
			case wire.Need:
				id, need, err := wire.DecodeNeed(f.payload)
				if err != nil {
					return nil, err
				}
				fl := firstUnsent(queue)
				if fl == nil || fl.b.ID != id || len(need) != len(fl.b.Entries) {
					return nil, fmt.Errorf("%w: need list for batch %s, which is not the next batch awaiting one", wire.ErrProtocol, batchname.Name(id))
				}
				for i := range fl.blocks {
					if !need[i] {
						return nil, fmt.Errorf("%w: batch %s: a block list for entry %d, which the need list does not ask for", wire.ErrProtocol, batchname.Name(id), i)
					}
				}
				fl.need = need
				if err := c.sendData(fl, need); err != nil {
					return nil, err
				}
				manifested--
				ahead -= fl.b.Bytes
			case wire.Skipped:
				// The receiver needs nothing of the next batch and has
				// committed it: no data; its ack follows.
				id, err := wire.DecodeID(f.payload)
				if err != nil {
					return nil, err
				}
				fl := firstUnsent(queue)
				if fl == nil || fl.b.ID != id || fl != queue[0] {
					return nil, fmt.Errorf("%w: batch %s reported in place out of turn", wire.ErrProtocol, batchname.Name(id))
				}
				fl.sent = true
				fl.need = make([]bool, len(fl.b.Entries))
				manifested--
				ahead -= fl.b.Bytes
			case wire.Ack:
				a, err := wire.DecodeAck(f.payload)
				if err != nil {
					return nil, err
				}
				if len(queue) == 0 || !queue[0].sent || queue[0].b.ID != a.ID {
					return nil, fmt.Errorf("%w: acknowledgement for batch %s, which is not the oldest batch in flight", wire.ErrProtocol, batchname.Name(a.ID))
				}
				fl := queue[0]
				for _, e := range a.Errors {
					if e.Index < 0 || e.Index >= len(fl.b.Entries) {
						return nil, fmt.Errorf("%w: acknowledgement of batch %s names entry %d of %d", wire.ErrProtocol, batchname.Name(a.ID), e.Index, len(fl.b.Entries))
					}
				}
				queue = queue[1:]
				done(Result{Batch: fl.b, Final: flags&wire.FlagFinal != 0, Ack: a, SrcErrors: fl.srcErrs, Need: fl.need, Deltas: fl.deltas})
			default:
				return nil, fmt.Errorf("%w: unexpected frame %q during transfer", wire.ErrProtocol, f.typ)
			}
		}
	}
}

// failReason waits a moment for the agent's Fail frame after the stream
// broke otherwise (a write to an agent that stopped reading): the agent
// usually said why.
func (c *Client) failReason() *RemoteError {
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case f, ok := <-c.frames:
			c.taken(f)
			var re *RemoteError
			if !ok || errors.As(f.err, &re) || f.err != nil {
				return re
			}
		case <-t.C:
			return nil
		}
	}
}

// addBlocks takes a block list for fl, the next batch awaiting its need
// list: one a file entry in order (a whole file, or a range of one
// counted from its offset), of at most the entry's bytes.
func addBlocks(fl *inflight, bl *wire.BlockList) error {
	if fl == nil || fl.b.ID != bl.ID {
		return fmt.Errorf("%w: block list for batch %s, which is not the next batch awaiting its need list", wire.ErrProtocol, batchname.Name(bl.ID))
	}
	if bl.Index >= len(fl.b.Entries) || fl.b.Entries[bl.Index].Kind != model.KindFile ||
		bl.Len > fl.b.Entries[bl.Index].DataLen() || fl.blocks[bl.Index] != nil {
		return fmt.Errorf("%w: batch %s: a block list for entry %d that is not a file or range of at least its %d bytes, or sent twice", wire.ErrProtocol, batchname.Name(bl.ID), bl.Index, bl.Len)
	}
	if fl.blocks == nil {
		fl.blocks = map[int]*wire.BlockList{}
	}
	fl.blocks[bl.Index] = bl
	return nil
}

func allNeeded(n int) []bool {
	need := make([]bool, n)
	for i := range need {
		need[i] = true
	}
	return need
}

func firstUnsent(q []*inflight) *inflight {
	for _, f := range q {
		if !f.sent {
			return f
		}
	}
	return nil
}

// sendData sends the data of a batch, plain or compressed as the
// stream's compression chooses, and its commit.
func (c *Client) sendData(fl *inflight, need []bool) error {
	if c.z == nil {
		far := c.Compress.Mode == compress.Auto && c.PathRTT != nil && c.PathRTT() >= compress.FarRTT
		c.z = compress.NewStream(c.Compress, c.Name, c.Logf, c.Share, far)
	}
	ctr := c.ctr.Load()
	if c.Compress.Mode == compress.Auto && c.obsHost.Total == 0 {
		c.obsHost, _ = readHost() // the first batch's start
	}
	codec := c.z.Codec(c.Src, fl.m, need)
	start, sent0 := time.Now(), c.sent.N
	var blocked0 int64
	if ctr != nil {
		blocked0 = ctr.SendNanos.Load()
	}
	if err := wire.WriteFrame(c.w, wire.Data, wire.EncodeData(fl.b.ID, codec)); err != nil {
		return err
	}
	tw := c.tarWriter(!c.NoIntegrity)
	// Compressed, every byte of the batch's tar stream (small files,
	// large ones, ranges of split ones) goes through the encoder: in
	// counts it, zout what the encoder made of it, in chunks.
	in, zout := &iocount.Writer{}, &iocount.Writer{W: c.w}
	if codec == wire.CodecZstd {
		enc, err := c.z.Encoder()
		if err != nil {
			return err
		}
		enc.Reset(wire.ChunkWriter{W: zout})
		in.W = enc
		tw = in
	}
	wr, err := c.Src.WriteBatch(tw, fl.m, need, fl.blocks, ctr, !c.NoIntegrity)
	if err != nil {
		return err
	}
	discards, failed, sums := wr.Discards, wr.Failed, wr.Sums
	fl.deltas, fl.blocks = wr.Deltas, nil
	if codec == wire.CodecZstd {
		if err := in.W.(io.Closer).Close(); err != nil {
			return err
		}
		if err := (wire.ChunkWriter{W: zout}).End(); err != nil {
			return err
		}
	}
	fl.srcErrs = append(fl.srcErrs, failed...)
	fl.sent = true
	if err := wire.WriteFrame(c.w, wire.Commit, wire.EncodeCommit(fl.b.ID, discards, sums...)); err != nil {
		return err
	}
	// Flushed here rather than by the loop, so that the batch's time
	// includes sending it.
	if err := c.w.Flush(); err != nil {
		return err
	}
	out := c.sent.N - sent0
	if codec == wire.CodecNone {
		in.N = out
	}
	c.observe(codec, in.N, zout.N, out, start, blocked0)
	return nil
}

// observe accounts a batch's data in the counters and feeds the
// stream's compression policy with how long it took: in bytes of tar
// stream went as out bytes on the wire (with the batch's other frames,
// and any the buffer held before them), zout of them compressed.
func (c *Client) observe(codec byte, in, zout, out int64, start time.Time, blocked0 int64) {
	now := time.Now()
	wall := now.Sub(start)
	var blocked time.Duration
	var recvWrite, recvCPU float64
	if ctr := c.ctr.Load(); ctr != nil {
		blocked = time.Duration(ctr.SendNanos.Load() - blocked0)
		ctr.Compressing.Store(codec == wire.CodecZstd)
		if codec == wire.CodecZstd {
			ctr.CompressIn.Add(in)
			ctr.CompressOut.Add(zout)
		}
		recvWrite, recvCPU = c.receiverShares(now, ctr.RecvWriteNanos.Load(), ctr.RecvCPUNanos.Load())
	}
	if c.Compress.Mode == compress.Auto {
		if host, ok := readHost(); ok {
			c.z.SetHost(host.BusySince(c.obsHost, hostcpu.Busy), c.limit.Load().Rate() > 0)
			c.obsHost = host
		}
	}
	c.z.Observe(codec, in, out, wall, blocked, recvWrite, recvCPU)
}

// receiverShares returns the receiver's share of the time writing since
// the last call, and the receiving process's CPU use in cores, from its
// running totals recv and cpu (nanoseconds).
//
// Before the first measure, a receiver that said its filesystem answers
// each operation after a round trip (Peer.Slow) is taken to have written
// all the time: the first batch's writes waited on it at least as likely
// as on the link, and compressing the next ones would only have added to
// the CPU that such a filesystem costs, for no gain.
func (c *Client) receiverShares(now time.Time, recv, cpu int64) (recvWrite, recvCPU float64) {
	if dt := float64(now.Sub(c.obsAt)); !c.obsAt.IsZero() && dt > 0 {
		recvWrite, recvCPU = float64(recv-c.obsRecv)/dt, float64(cpu-c.obsCPU)/dt
	} else if c.Peer.Slow {
		recvWrite = 1
	}
	if c.Peer.Process == wire.ProcessID {
		recvCPU = 0 // an agent in this very process: its CPU time is ours too
	}
	c.obsAt, c.obsRecv, c.obsCPU = now, recv, cpu
	return recvWrite, recvCPU
}

// Close implements Conn: it ends the stream and waits for the agent's totals.
func (c *Client) Close(ctx context.Context) (wire.Totals, error) {
	defer c.shut()
	var t wire.Totals
	if err := wire.WriteFrame(c.w, wire.End, nil); err != nil {
		return t, fmt.Errorf("%s: %w", c.Name, err)
	}
	if err := c.w.Flush(); err != nil {
		return t, fmt.Errorf("%s: %w", c.Name, err)
	}
	f, err := c.next(ctx)
	if err != nil {
		return t, fmt.Errorf("%s: waiting for the summary: %w", c.Name, err)
	}
	if f.typ != wire.Summary {
		return t, fmt.Errorf("%s: %w: got frame %q, want the summary", c.Name, wire.ErrProtocol, f.typ)
	}
	if err := wire.DecodeJSON(f.payload, &t); err != nil {
		return wire.Totals{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	return t, nil
}

// Abort closes the connection at once.
func (c *Client) Abort() { c.shut() }
