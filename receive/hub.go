package receive

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// maxPending bounds the manifests an agent holds before their data.
const maxPending = 2 * wire.Window

// DefaultManifestMemory is a job's default Hub.ManifestMemory. A stream of
// the default batches (1000 files) holds a few megabytes of manifests
// (four ahead of their data, one being received, one being committed);
// the budget leaves room for hundreds of streams, or batches a hundred
// times larger on a few, and keeps a sender of many manifests of a
// million entries (over 100 MiB each decoded) from holding gigabytes.
const DefaultManifestMemory = 256 << 20

// StreamManifestMemory is what each stream of a job may count on beyond
// DefaultManifestMemory: a job of many streams (up to --max-streams) with
// long paths would otherwise pass the default with batches of the default
// size. The bound still holds: a job's streams are the connections its
// receiver took, and those are capped (serve's --max-conns, the agent's K).
const StreamManifestMemory = 4 << 20

// Serve runs the receiver agent on one connection: r and w are the
// sender's frames (stdin and stdout of `bulkmove --agent`), root the
// destination. It returns nil after a clean End, an error otherwise; a
// fatal error is also sent to the sender as a Fail frame.
func Serve(ctx context.Context, r io.Reader, w io.Writer, root, version string) (err error) {
	return ServeWith(ctx, r, w, root, version, nil)
}

// ServeWith is Serve, calling opened with the receiver once the handshake
// has opened it (for the agent's metrics exporter).
func ServeWith(ctx context.Context, r io.Reader, w io.Writer, root, version string, opened func(*extract.Receiver)) (err error) {
	h := &Hub{Root: root, Version: version, Opened: opened}
	return h.Serve(ctx, r, w)
}

// Serve and ServeWith receive under the zero Policy: what a sender may ask
// for beyond data, names, modes and times is the Hub's Policy to allow.

// Hub serves the K sessions of one job in one agent process, with one
// Receiver for them all: hard links may then point at files any stream
// wrote, and the agent's metrics cover every stream. Serve may be called
// from several goroutines; the receiver is opened by the first session's
// handshake and closed when the last session ends.
type Hub struct {
	Root, Version string
	Opened        func(*extract.Receiver) // called once the receiver is open
	// Open, if set, opens the receiver instead of extract.Open(Root):
	// serve's, beneath a directory it holds open (Root then only names
	// it).
	Open func(extract.Options) (*extract.Receiver, error)
	// ManifestMemory bounds the memory the job's manifests hold, in bytes,
	// across all its streams: from the arrival of a manifest's frame until
	// its batch is committed, each counts its frame while it is read, then
	// its decoded entries and need list (wire.ManifestCost). A stream whose
	// manifest would pass it fails with an error naming the limit (wrapping
	// wire.ErrLimit), which the sender does not retry. 0 is
	// DefaultManifestMemory.
	ManifestMemory int64
	// Shared, if set, bounds the same memory across the jobs of a receiver
	// that serves many at once (serve's): a stream whose manifest would
	// pass either bound fails.
	Shared *MemoryBudget
	// Policy is what the receiving side allows its senders to ask for
	// (owners, setuid/setgid bits, extended attributes, ACLs): a Hello's
	// options are requests, granted within it (extract.Policy.Grant). The
	// zero Policy allows none of them.
	Policy extract.Policy
	// Items, if set, makes the receiver itemize (as the sender's -i
	// would) and is told, for each batch committed with items, errors or
	// entries moved aside (--backup), its entries and its ack: a pull's
	// -i, --log-file and backups, written where the pull was typed.
	// Pruned is told each result of a prune that removed entries or
	// failed to. Both may be called from several sessions at once.
	Items  func(entries []model.Entry, ack *wire.BatchAck)
	Pruned func(*wire.PruneResult)

	mu     sync.Mutex
	held   int64 // manifest memory the job's streams hold (under mu)
	recv   *extract.Receiver
	opts   wire.ReceiveOptions
	denied []string // what the policy denied, for each session's Hello
	refs   int
	cpu0   int64 // the process's CPU time when the receiver opened (see cpu)
}

// acquire returns the hub's receiver, opening it with opt, granted within
// the hub's Policy, if no session holds it; every session of a job must
// ask for the same options. denied names what the policy denied.
func (h *Hub) acquire(opt *wire.ReceiveOptions) (recv *extract.Receiver, denied []string, err error) {
	var o wire.ReceiveOptions
	if opt != nil {
		o = *opt
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recv != nil {
		if o != h.opts {
			return nil, nil, fmt.Errorf("%w: a stream asks for receive options %+v, another for %+v", wire.ErrProtocol, o, h.opts)
		}
		h.refs++
		return h.recv, h.denied, nil
	}
	granted, denied, err := h.Policy.Grant(opt)
	if err != nil {
		return nil, nil, err // before anything is opened or written
	}
	if h.Items != nil {
		granted.Itemize = true
	}
	open := h.Open
	if open == nil {
		open = func(o extract.Options) (*extract.Receiver, error) { return extract.Open(h.Root, o) }
	}
	recv, err = open(granted)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", h.Root, err)
	}
	h.recv, h.opts, h.denied, h.refs = recv, o, denied, 1
	h.cpu0 = cpuNanos()
	if h.Opened != nil {
		h.Opened(recv)
	}
	return recv, denied, nil
}

// memLimit is the job's manifest memory budget (under h.mu): its
// ManifestMemory, or by default DefaultManifestMemory or
// StreamManifestMemory for each of its streams, whichever is more.
func (h *Hub) memLimit() int64 {
	if h.ManifestMemory > 0 {
		return h.ManifestMemory
	}
	return max(DefaultManifestMemory, int64(h.refs)*StreamManifestMemory)
}

// limit is memLimit, outside h.mu.
func (h *Hub) limit() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.memLimit()
}

// room is the manifest memory the job may still take.
func (h *Hub) room() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.memLimit() - h.held
	if b := h.Shared; b != nil {
		b.mu.Lock()
		r = min(r, b.Limit-b.held)
		b.mu.Unlock()
	}
	return max(0, r)
}

// take takes n bytes of the job's manifest memory, or fails (what for
// names what would take them) if that would pass the budget.
func (h *Hub) take(n int64, what string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if limit := h.memLimit(); h.held+n > limit {
		return fmt.Errorf("agent: %w: %s would take %s of memory while the job's batches hold %s, over its limit of %s for manifests not yet committed and frames being read; "+
			"send smaller batches (--batch-files) or fewer streams (-j)", wire.ErrLimit, what, units.Size(n), units.Size(h.held), units.Size(limit))
	}
	if err := h.Shared.take(n, what); err != nil {
		return err
	}
	h.held += n
	return nil
}

func (h *Hub) give(n int64) {
	h.mu.Lock()
	h.held -= n
	h.mu.Unlock()
	h.Shared.give(n)
}

// MemoryBudget is manifest memory shared by the jobs of one receiver
// (Hub.Shared); a nil *MemoryBudget bounds nothing.
type MemoryBudget struct {
	Limit int64 // bytes

	mu   sync.Mutex
	held int64
}

func (b *MemoryBudget) take(n int64, what string) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.Limit {
		return fmt.Errorf("agent: %w: %s would take %s of memory while this receiver's jobs hold %s, over its limit of %s for all its jobs' manifests and frames being read; "+
			"try again when fewer jobs run, or send smaller batches (--batch-files)", wire.ErrLimit, what, units.Size(n), units.Size(b.held), units.Size(b.Limit))
	}
	b.held += n
	return nil
}

func (b *MemoryBudget) give(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
}

// Held is the memory the budget's jobs hold.
func (b *MemoryBudget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// sharedLimit names the receiver's limit across jobs, if any, for messages.
func (h *Hub) sharedLimit() string {
	if h.Shared == nil {
		return ""
	}
	return fmt.Sprintf(", this receiver's limit for all its jobs %s", units.Size(h.Shared.Limit))
}

// ManifestHeld is the manifest memory the hub's streams hold now: the
// manifests received and not yet committed.
func (h *Hub) ManifestHeld() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// sessionMem is what one session holds of its job's manifest memory: a
// batch gives its share back once committed (from the commit's goroutine),
// the session all that is left when it ends.
type sessionMem struct {
	h    *Hub
	mu   sync.Mutex
	held int64
}

func (s *sessionMem) take(n int64, what string) error {
	if err := s.h.take(n, what); err != nil {
		return err
	}
	s.mu.Lock()
	s.held += n
	s.mu.Unlock()
	return nil
}

func (s *sessionMem) give(n int64) {
	s.mu.Lock()
	s.held -= n
	s.mu.Unlock()
	s.h.give(n)
}

// close gives back what the session still holds.
func (s *sessionMem) close() {
	s.mu.Lock()
	n := s.held
	s.held = 0
	s.mu.Unlock()
	s.h.give(n)
}

func (h *Hub) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs--; h.refs == 0 {
		h.recv.Close()
		h.recv = nil
	}
}

// Serve runs one session of the hub: see the package function Serve.
func (h *Hub) Serve(ctx context.Context, r io.Reader, w io.Writer) (err error) {
	root, version := h.Root, h.Version
	// Told to stop (the agent got SIGTERM), a session waiting on its sender
	// ends: its connection is closed under the read.
	if c, ok := r.(io.Closer); ok {
		defer context.AfterFunc(ctx, func() { c.Close() })()
	}
	br := bufio.NewReaderSize(r, 256<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	// A frame's payload is read as it arrives, and is valid until the next
	// frame is read: each is decoded before that.
	fr := &wire.FrameReader{R: br}
	// Until the handshake is answered, a failure is the stream refused:
	// the sender shows the reason and does not try again.
	fail := func(e error) error { return wire.Refuse(w, e) }
	typ, p, err := fr.Next()
	if err != nil {
		return fmt.Errorf("agent: reading handshake: %w", err)
	}
	if typ != wire.Hello {
		return fail(fmt.Errorf("%w: the first frame is %q, want hello", wire.ErrProtocol, typ))
	}
	var hello wire.Handshake
	if err := wire.DecodeJSON(p, &hello); err != nil {
		return fail(err)
	}
	me := wire.Handshake{Proto: wire.Proto, Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH, UID: os.Geteuid(), Root: root, Process: wire.ProcessID}
	if hello.Proto != wire.Proto {
		// Answer with our own hello so the sender can name both versions.
		wire.WriteFrame(bw, wire.Hello, wire.EncodeJSON(me))
		bw.Flush()
		return fmt.Errorf("agent: %w: the sender (bulkmove %s) speaks protocol %d, this agent (bulkmove %s) speaks %d",
			wire.ErrVersion, hello.Version, hello.Proto, version, wire.Proto)
	}
	recv, denied, err := h.acquire(hello.Options)
	if err != nil {
		return fail(err)
	}
	me.Denied = denied
	// A dry run's streams only ask: what would write is refused.
	dry := hello.Options != nil && hello.Options.DryRun
	var plain io.Reader = br // a plain batch's tar stream
	if tc, ok := r.(*net.TCPConn); ok && hello.Options != nil && hello.Options.NoSums {
		// Its bodies can go from the socket to the files by splice.
		if raw, err := tc.SyscallConn(); err == nil {
			plain = extract.SocketReader{Reader: br, Raw: raw}
		}
	}
	defer h.release()
	me.Free = recv.FreeSpace()
	me.Slow = recv.Slow()
	me.DestID = recv.Identity()
	if err := wire.WriteFrame(bw, wire.Hello, wire.EncodeJSON(me)); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	// A deadline on the connection (serve's) bounds the time from accept
	// to the end of the handshake; the session then lasts as long as its
	// sender sends.
	if d, ok := r.(interface{ SetDeadline(time.Time) error }); ok {
		d.SetDeadline(time.Time{})
	}

	type pending struct {
		m     *wire.BatchManifest
		need  []bool
		mem   int64    // the job's manifest memory it holds
		items []uint16 // with Itemize: what the quick check found (Txn.SetItems)
		// deltas: the temporaries of its files that may come as a
		// block delta, whose block lists went before its need list.
		deltas *extract.Deltas
	}
	var queue []pending // manifests answered, data not yet received
	defer func() {
		for _, p := range queue {
			p.deltas.Close()
		}
	}()
	// Manifests hold the job's memory from their frame's header to their
	// batch's commit, the other frames that carry lists while they are
	// read and handled (see Hub.ManifestMemory).
	mem := &sessionMem{h: h}
	defer mem.close()  // after the commits under way (deferred below)
	var frameMem int64 // the frame's, from its header until it is handled
	fr.Admit = func(typ byte, n int) error {
		switch typ {
		case wire.Manifest:
			if len(queue) >= maxPending {
				return fmt.Errorf("%w: more than %d manifests ahead of their data", wire.ErrProtocol, maxPending)
			}
		case wire.Commit, wire.Prune:
		default:
			return nil // small (wire.FrameLimit)
		}
		if err := mem.take(int64(n), fmt.Sprintf("a %q frame of %d bytes", typ, n)); err != nil {
			return err
		}
		frameMem = int64(n)
		return nil
	}
	var txnMem int64 // the open batch's manifest memory
	var txnEntries []model.Entry
	o := &framer{bw: bw}
	fail = func(e error) error {
		o.send(outFrame{wire.Fail, []byte(e.Error())})
		return e
	}
	c := &committer{o: o}
	defer c.wait() // a commit under way lands (or fails) before the session ends
	var txn *extract.Txn
	var txnID uint64
	var z inflater // decompresses the session's compressed batches
	defer z.close()
	var pruning Pruning // a --delete of a directory in several requests
	defer pruning.Close()
	defer func() {
		// However the session ends, a batch that was not committed leaves
		// no temporary files behind.
		if txn != nil {
			txn.Abort()
		}
	}()
	// A connection that can time a stall (serve's) is told, before each
	// frame, whether the session waits with work in flight (a manifest
	// answered and its data not in, a batch not committed, a frame begun)
	// or between batches, where a sender may wait as long as its job runs.
	stall, _ := r.(interface{ InFlight(bool) })
	for {
		mem.give(frameMem) // the last frame is handled
		frameMem = 0
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if err := c.failed(); err != nil {
			return err
		}
		if stall != nil {
			stall.InFlight(len(queue) > 0 || txn != nil || br.Buffered() > 0)
		}
		typ, p, err := fr.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fail(Stopped(ctx))
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("agent: the sender closed the connection before the end")
			}
			return fail(fmt.Errorf("agent: %w", err))
		}
		switch typ {
		case wire.Manifest:
			// The frame's memory is held while it is decoded, beside what
			// the decoded manifest takes (and its need list, a byte an
			// entry), which is then held in its place.
			m, err := wire.DecodeManifestMax(p, h.room())
			if err != nil {
				if errors.Is(err, wire.ErrLimit) {
					err = fmt.Errorf("agent: %w; the job's limit for manifests not yet committed is %s%s: send smaller batches (--batch-files) or fewer streams (-j)", err, units.Size(h.limit()), h.sharedLimit())
				}
				return fail(err)
			}
			cost := wire.ManifestCost(m) + int64(len(m.Entries))
			if err := mem.take(cost, fmt.Sprintf("batch %s's manifest of %d entries", batchname.Name(m.ID), len(m.Entries))); err != nil {
				return fail(err)
			}
			mem.give(frameMem)
			frameMem = 0
			// The owners and modes this receiver gives the entries
			// (--usermap, --chmod), for all that follows.
			recv.Translate(m.Entries, m.Names)
			if m.Flags&(wire.FlagVerify|wire.FlagItemize) != 0 {
				ack := &wire.BatchAck{ID: m.ID}
				if m.Flags&wire.FlagVerify != 0 {
					ack.Errors = recv.Verify(m.Entries, m.Sums)
				} else {
					ack.Items = recv.Would(m.Entries, m.Sums)
				}
				mem.give(cost)
				if err := o.send(outFrame{wire.Ack, wire.EncodeAck(ack)}); err != nil {
					return err
				}
				continue
			}
			if dry {
				return fail(fmt.Errorf("%w: batch %s to move in a dry run", wire.ErrProtocol, batchname.Name(m.ID)))
			}
			if m.Flags&wire.FlagFinal != 0 {
				// Deferred entries: all applied, no need list (the
				// sender does not wait for one).
				queue = append(queue, pending{m, slices.Repeat([]bool{true}, len(m.Entries)), cost, nil, nil})
				continue
			}
			need, items := recv.NeedItems(m.Entries, m.Sums)
			deltas := recv.PrepareDeltas(m.Entries, need)
			if len(queue) == 0 && txn == nil && c.idle() && nothingToSend(m.Entries, need) {
				// A batch already in place (a pass over an unchanged
				// tree): committed now, no data to wait for.
				t := recv.Begin(m.Entries)
				t.SetItems(items)
				t.UseDeltas(deltas) // (refusals alone: nothing is needed)
				for i := range m.Entries {
					if deltas.Failed(i) == nil {
						t.Skip(i)
					}
				}
				ack := t.Commit(m.ID, nil)
				ack.CPUNanos = h.cpu()
				h.items(m.Entries, ack)
				mem.give(cost)
				if err := o.send(outFrame{wire.Skipped, wire.EncodeID(m.ID)}, outFrame{wire.Ack, wire.EncodeAck(ack)}); err != nil {
					return err
				}
				continue
			}
			queue = append(queue, pending{m, need, cost, items, deltas})
			var out []outFrame
			for _, b := range deltas.Lists(m.ID, len(m.Entries)) {
				out = append(out, outFrame{wire.Blocks, wire.EncodeBlocks(b)})
			}
			if err := o.send(append(out, outFrame{wire.Need, wire.EncodeNeed(m.ID, need)})...); err != nil {
				return err
			}
		case wire.Data:
			id, codec, err := wire.DecodeData(p)
			if err != nil {
				return fail(err)
			}
			if txn != nil || len(queue) == 0 || queue[0].m.ID != id {
				return fail(fmt.Errorf("%w: data for batch %s out of order", wire.ErrProtocol, batchname.Name(id)))
			}
			pd := queue[0]
			queue = queue[1:]
			data := plain
			if codec == wire.CodecZstd {
				if data, err = z.open(br, tarBound(pd.m, pd.need, hello.Options)); err != nil {
					return fail(err)
				}
			}
			t, err := recv.ReceiveDeltas(pd.m, pd.need, pd.deltas, data)
			if t != nil {
				t.SetItems(pd.items)
			}
			if codec == wire.CodecZstd {
				if err = z.finish(id, err); err != nil && t != nil {
					t.Abort()
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return fail(Stopped(ctx))
				}
				return fail(err)
			}
			txn, txnID, txnMem, txnEntries = t, id, pd.mem, pd.m.Entries
		case wire.Commit:
			id, discards, sums, err := wire.DecodeCommitSums(p)
			if err != nil {
				return fail(err)
			}
			if txn == nil || id != txnID {
				return fail(fmt.Errorf("%w: commit of batch %s, which has no data", wire.ErrProtocol, batchname.Name(id)))
			}
			t, tm, te := txn, txnMem, txnEntries
			txn, txnMem, txnEntries = nil, 0, nil
			// On a slow destination the renames of this batch go on while
			// the next one's data arrives (most often into other
			// directories, whose locks are free); the acks keep their order.
			if err := c.commit(recv.IOWidth() > 1, func() *wire.BatchAck {
				ack := t.CommitSums(id, discards, sums)
				ack.CPUNanos = h.cpu()
				h.items(te, ack)
				mem.give(tm)
				return ack
			}); err != nil {
				return err
			}
		case wire.Prune:
			req, err := wire.DecodePrune(p)
			if err != nil {
				return fail(err)
			}
			if txn != nil || len(queue) != 0 {
				return fail(fmt.Errorf("%w: prune with batches still open", wire.ErrProtocol))
			}
			if dry && !req.DryRun && !req.CountOnly {
				return fail(fmt.Errorf("%w: a prune that removes, in a dry run", wire.ErrProtocol))
			}
			if err := c.wait(); err != nil {
				return err
			}
			pruned := func(r *wire.PruneResult) {
				if h.Pruned != nil && !req.DryRun && !req.CountOnly && (len(r.Removed) > 0 || len(r.Errors) > 0) {
					h.Pruned(r)
				}
			}
			res, err := ApplyPrune(recv, &pruning, req, func(r *wire.PruneResult) error {
				pruned(r)
				return o.send(outFrame{wire.Pruned, wire.EncodePruned(r)})
			})
			if err != nil {
				return fail(err)
			}
			pruned(res)
			if err := o.send(outFrame{wire.Pruned, wire.EncodePruned(res)}); err != nil {
				return err
			}
		case wire.End:
			if txn != nil || len(queue) != 0 {
				return fail(fmt.Errorf("%w: end with batches still open", wire.ErrProtocol))
			}
			if err := c.wait(); err != nil {
				return err
			}
			return o.send(outFrame{wire.Summary, wire.EncodeJSON(recv.Totals())})
		default:
			return fail(fmt.Errorf("%w: unexpected frame %q", wire.ErrProtocol, typ))
		}
	}
}

// items tells Items what a batch's ack says changed or failed, if
// anything.
func (h *Hub) items(entries []model.Entry, ack *wire.BatchAck) {
	if h.Items != nil && (len(ack.Items) > 0 || len(ack.Errors) > 0 || ack.BackedUp > 0) {
		h.Items(entries, ack)
	}
}

// nothingToSend reports whether a data batch needs none of its files: then
// the agent commits it at once (wire.Skipped) when no batch is ahead of it.
func nothingToSend(entries []model.Entry, need []bool) bool {
	for i := range entries {
		if need[i] || entries[i].Kind != model.KindFile {
			return false
		}
	}
	return true
}

// cpu is this process's CPU time since the job's receiver opened: an
// agent that lingers serves one job after another, and the sender's
// verdict must not count the earlier ones' time as this job's.
func (h *Hub) cpu() int64 {
	n := cpuNanos()
	if n == 0 {
		return 0 // unknown
	}
	return max(1, n-h.cpu0)
}

// cpuNanos is this process's CPU time, user and system.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// Stopped is a session's error, and the agent's, once the agent was told
// to stop (ctx is done): its connections were closed under their reads.
func Stopped(ctx context.Context) error {
	return fmt.Errorf("agent: stopped (%v)", context.Cause(ctx))
}

// outFrame is one frame to send.
type outFrame struct {
	typ     byte
	payload []byte
}

// framer writes a session's frames, flushed, from the session's loop and
// its commit goroutine.
type framer struct {
	mu sync.Mutex
	bw *bufio.Writer
}

func (o *framer) send(fs ...outFrame) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range fs {
		if err := wire.WriteFrame(o.bw, f.typ, f.payload); err != nil {
			return err
		}
	}
	return o.bw.Flush()
}

// committer runs a session's commits, one at a time, each after the one
// before: in the session's goroutine, or (async) beside it while the next
// batch arrives. Acks go out in the order of the commits.
type committer struct {
	o    *framer
	last *commitJob // the latest commit, nil before the first
}

type commitJob struct {
	done chan struct{}
	err  error // sending its ack (or an earlier one) failed
}

// commit runs fn, which commits a batch, and sends its ack after every
// earlier one; with async it returns at once.
func (c *committer) commit(async bool, fn func() *wire.BatchAck) error {
	prev := c.last
	j := &commitJob{done: make(chan struct{})}
	c.last = j
	run := func() {
		defer close(j.done)
		ack := fn()
		if prev != nil {
			<-prev.done
			if j.err = prev.err; j.err != nil {
				return
			}
		}
		j.err = c.o.send(outFrame{wire.Ack, wire.EncodeAck(ack)})
	}
	if !async {
		run()
		return j.err
	}
	go run()
	return nil
}

// idle reports whether no commit is under way.
func (c *committer) idle() bool {
	if c.last == nil {
		return true
	}
	select {
	case <-c.last.done:
		return true
	default:
		return false
	}
}

// failed returns the error of a finished commit's ack, if any.
func (c *committer) failed() error {
	if c.last != nil && c.idle() {
		return c.last.err
	}
	return nil
}

// wait returns once every commit is done, with the error of its ack.
func (c *committer) wait() error {
	if c.last == nil {
		return nil
	}
	<-c.last.done
	return c.last.err
}
