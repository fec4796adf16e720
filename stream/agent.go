package stream

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// processID names this process in handshakes.
var processID = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// maxPending bounds the manifests an agent holds before their data.
const maxPending = 2 * Window

// Serve runs the receiver agent on one connection: r and w are the
// sender's frames (stdin and stdout of `bulkmove agent`), root the
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

// Hub serves the K sessions of one job in one agent process, with one
// Receiver for them all: hard links may then point at files any stream
// wrote, and the agent's metrics cover every stream. Serve may be called
// from several goroutines; the receiver is opened by the first session's
// handshake and closed when the last session ends.
type Hub struct {
	Root, Version string
	Opened        func(*extract.Receiver) // called once the receiver is open

	mu   sync.Mutex
	recv *extract.Receiver
	opts wire.ReceiveOptions
	refs int
}

// acquire returns the hub's receiver, opening it with opt if no session
// holds it; every session of a job must ask for the same options.
func (h *Hub) acquire(opt *wire.ReceiveOptions) (*extract.Receiver, error) {
	var o wire.ReceiveOptions
	if opt != nil {
		o = *opt
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recv != nil {
		if o != h.opts {
			return nil, fmt.Errorf("%w: a stream asks for receive options %+v, another for %+v", wire.ErrProtocol, o, h.opts)
		}
		h.refs++
		return h.recv, nil
	}
	recv, err := extract.Open(h.Root, extract.FromWire(opt))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.Root, err)
	}
	h.recv, h.opts, h.refs = recv, o, 1
	if h.Opened != nil {
		h.Opened(recv)
	}
	return recv, nil
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
	br := bufio.NewReaderSize(r, 256<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	fail := func(e error) error {
		wire.WriteFrame(bw, wire.Fail, []byte(e.Error()))
		bw.Flush()
		return e
	}
	typ, p, err := wire.ReadFrame(br)
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
	me := wire.Handshake{Proto: wire.Proto, Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH, UID: os.Geteuid(), Root: root, Process: processID}
	if hello.Proto != wire.Proto {
		// Answer with our own hello so the sender can name both versions.
		wire.WriteFrame(bw, wire.Hello, wire.EncodeJSON(me))
		bw.Flush()
		return fmt.Errorf("agent: %w: the sender (bulkmove %s) speaks protocol %d, this agent (bulkmove %s) speaks %d",
			ErrVersion, hello.Version, hello.Proto, version, wire.Proto)
	}
	recv, err := h.acquire(hello.Options)
	if err != nil {
		return fail(err)
	}
	defer h.release()
	me.Free = FreeSpace(recv.Dir())
	if err := wire.WriteFrame(bw, wire.Hello, wire.EncodeJSON(me)); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}

	type pending struct {
		m    *wire.BatchManifest
		need []bool
	}
	var queue []pending // manifests answered, data not yet received
	var txn *extract.Txn
	var txnID uint64
	var z inflater // decompresses the session's compressed batches
	defer z.close()
	defer func() {
		// However the session ends, a batch that was not committed leaves
		// no temporary files behind.
		if txn != nil {
			txn.Abort()
		}
	}()
	for {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		typ, p, err := wire.ReadFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("agent: the sender closed the connection before the end")
			}
			return fail(fmt.Errorf("agent: %w", err))
		}
		switch typ {
		case wire.Manifest:
			m, err := wire.DecodeManifest(p)
			if err != nil {
				return fail(err)
			}
			if len(queue) >= maxPending {
				return fail(fmt.Errorf("%w: more than %d manifests ahead of their data", wire.ErrProtocol, maxPending))
			}
			if m.Flags&wire.FlagVerify != 0 {
				ack := &wire.BatchAck{ID: m.ID, Errors: recv.Verify(m.Entries, m.Sums)}
				if err := wire.WriteFrame(bw, wire.Ack, wire.EncodeAck(ack)); err != nil {
					return err
				}
				if err := bw.Flush(); err != nil {
					return err
				}
				continue
			}
			if m.Flags&wire.FlagFinal != 0 {
				// Deferred entries: all applied, no need list (the
				// sender does not wait for one).
				queue = append(queue, pending{m, allNeeded(len(m.Entries))})
				continue
			}
			need := recv.NeedSums(m.Entries, m.Sums)
			if len(queue) == 0 && txn == nil && nothingToSend(m.Entries, need) {
				// A batch already in place (a pass over an unchanged
				// tree): committed now, no data to wait for.
				t := recv.Begin(m.Entries)
				for i := range m.Entries {
					t.Skip(i)
				}
				ack := t.Commit(m.ID, nil)
				ack.CPUNanos = cpuNanos()
				if err := wire.WriteFrame(bw, wire.Skipped, wire.EncodeID(m.ID)); err != nil {
					return err
				}
				if err := wire.WriteFrame(bw, wire.Ack, wire.EncodeAck(ack)); err != nil {
					return err
				}
				if err := bw.Flush(); err != nil {
					return err
				}
				continue
			}
			queue = append(queue, pending{m, need})
			if err := wire.WriteFrame(bw, wire.Need, wire.EncodeNeed(m.ID, need)); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
		case wire.Data:
			id, codec, err := wire.DecodeData(p)
			if err != nil {
				return fail(err)
			}
			if txn != nil || len(queue) == 0 || queue[0].m.ID != id {
				return fail(fmt.Errorf("%w: data for batch %d out of order", wire.ErrProtocol, id))
			}
			pd := queue[0]
			queue = queue[1:]
			var data io.Reader = br
			if codec == wire.CodecZstd {
				if data, err = z.open(br, tarBound(pd.m, pd.need, hello.Options)); err != nil {
					return fail(err)
				}
			}
			t, err := recv.Receive(pd.m, pd.need, data)
			if codec == wire.CodecZstd {
				if err = z.finish(id, err); err != nil && t != nil {
					t.Abort()
				}
			}
			if err != nil {
				return fail(err)
			}
			txn, txnID = t, id
		case wire.Commit:
			id, discards, sums, err := wire.DecodeCommitSums(p)
			if err != nil {
				return fail(err)
			}
			if txn == nil || id != txnID {
				return fail(fmt.Errorf("%w: commit of batch %d, which has no data", wire.ErrProtocol, id))
			}
			ack := txn.CommitSums(id, discards, sums)
			ack.CPUNanos = cpuNanos()
			txn = nil
			if err := wire.WriteFrame(bw, wire.Ack, wire.EncodeAck(ack)); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
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
			res, err := ApplyPrune(recv, req)
			if err != nil {
				return fail(err)
			}
			if err := wire.WriteFrame(bw, wire.Pruned, wire.EncodePruned(res)); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
		case wire.End:
			if txn != nil || len(queue) != 0 {
				return fail(fmt.Errorf("%w: end with batches still open", wire.ErrProtocol))
			}
			if err := wire.WriteFrame(bw, wire.Summary, wire.EncodeJSON(recv.Totals())); err != nil {
				return err
			}
			return bw.Flush()
		default:
			return fail(fmt.Errorf("%w: unexpected frame %q", wire.ErrProtocol, typ))
		}
	}
}

// FreeSpace is what an unprivileged user may still write under dir, in
// bytes (statfs f_bavail), 0 if unknown.
func FreeSpace(dir string) int64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// nothingToSend reports whether a data batch needs none of its files: then
// the agent commits it at once (wire.Skipped) when no batch is ahead of it.
func nothingToSend(entries []sharder.Entry, need []bool) bool {
	for i := range entries {
		if need[i] || entries[i].Kind != sharder.KindFile {
			return false
		}
	}
	return true
}

// cpuNanos is this process's CPU time, user and system.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
