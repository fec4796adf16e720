// Package local is the transport to a receiver in this process (a DEST on
// this machine): no tar, no wire, no socket; file data goes from the
// source file to the temporary file at the destination with
// copy_file_range. The job's streams share one extract.Receiver, so the
// safety rules are those of every other transport.
//
// It imports the receiving side (receive/extract) as only a transport that
// runs the receiver in-process may; the sending side's pool drives its
// Conns like any other.
package local

import (
	"context"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// Conn is a stream to a receiver in this process: no tar, no wire; file
// data goes from the source file to the temporary file with
// copy_file_range. Several Conns share one Receiver.
type Conn struct {
	Recv *extract.Receiver
	Src  source.Source
	ctr  *send.Counters
	// Limit, if set, is the job's transfer limit (shared by all streams),
	// on top of Src.Limit: locally, the bytes copied. While its rate is
	// not zero, files are read and written rather than handed to
	// copy_file_range, so that the bytes pass at an even pace; a change
	// of rate from or to no limit applies from the next file.
	Limit *ratelimit.Bucket

	pruning receive.Pruning // a --delete of a directory in several requests
}

// SetCounters implements send.Counted. Locally, reading and writing are one
// copy_file_range: their time is the receiver's write time. The stream's
// own time is accounted as a remote stream's is: idle while it waits for
// a batch (the walk), ack wait while the batches it writes at once
// (localOverlap) fill its window; under a limit, where files are read and
// written rather than copied in the kernel, reading the source and
// waiting for the limit's bucket (blocked sending, as a remote stream's
// turn in the bucket counts).
func (l *Conn) SetCounters(c *send.Counters) { l.ctr = c }

// since adds the time since start to counter n, if the stream is counted.
func (l *Conn) since(n func(*send.Counters) *atomic.Int64, start time.Time) {
	if l.ctr != nil {
		n(l.ctr).Add(int64(time.Since(start)))
	}
}

func idleNanos(c *send.Counters) *atomic.Int64 { return &c.IdleNanos }
func waitNanos(c *send.Counters) *atomic.Int64 { return &c.WaitNanos }

// timedReader adds the time spent in its Reads to a counter.
type timedReader struct {
	r io.Reader
	n *atomic.Int64
}

func (t timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := t.r.Read(p)
	t.n.Add(int64(time.Since(start)))
	return n, err
}

// SetLimit implements send.Limited.
func (l *Conn) SetLimit(b *ratelimit.Bucket) { l.Limit = b }

// Run implements send.Conn.
func (l *Conn) Run(ctx context.Context, in <-chan *model.Batch, done func(send.Result)) ([]*model.Batch, error) {
	// On a slow destination a batch's renames go on while the next one is
	// written, and localOverlap batches are written at once: the next
	// starts while the last files of the one before are written (most
	// often into other directories, whose locks are free). Results keep
	// their order.
	var prev chan struct{} // closed when the previous batch's result is out
	defer func() {
		if prev != nil {
			<-prev
		}
	}()
	// finish commits a written batch and reports it once the one before
	// it (before, if not nil) is out.
	finish := func(r send.Result, commit func() *wire.BatchAck, before chan struct{}) {
		r.Ack = commit()
		if l.ctr != nil {
			l.ctr.BytesSent.Add(r.Ack.Bytes)
			l.ctr.FilesSent.Add(r.Ack.Files)
		}
		if before != nil {
			<-before
		}
		done(r)
	}
	writing := make(chan struct{}, localOverlap)
	for {
		// A place to write in before a batch is taken: a batch waiting
		// here could have gone to another stream.
		start := time.Now()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case writing <- struct{}{}:
		}
		l.since(waitNanos, start)
		start = time.Now()
		var b *model.Batch
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case bb, ok := <-in:
			if !ok {
				return nil, nil
			}
			b = bb
		}
		l.since(idleNanos, start)
		if l.Recv.IOWidth() <= 1 && prev == nil {
			r, commit, err := l.write(ctx, b, false)
			<-writing
			if err != nil {
				return nil, err
			}
			finish(r, commit, nil)
			continue
		}
		before, next := prev, make(chan struct{})
		prev = next
		go func() {
			defer close(next)
			r, commit, err := l.write(ctx, b, false)
			<-writing
			if err != nil {
				return // the job stops (ctx): the loop above returns its error
			}
			finish(r, commit, before)
		}()
	}
}

// localOverlap is how many batches a Conn writes at once on a
// slow destination. With one, a batch's last files went into place by few
// goroutines while the filesystem could take many more, and each
// directory's lock takes the links into it one at a time: the files of
// one batch, in a directory or two, waited on them. Two at once overlap
// one batch's last links with the next one's writes; three did no
// better.
const localOverlap = 2

// Final implements send.Conn.
func (l *Conn) Final(ctx context.Context, bs []*model.Batch, done func(send.Result)) error {
	for _, b := range bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, commit, _ := l.write(ctx, b, true)
		res.Ack = commit()
		done(res)
	}
	return nil
}

// Close implements send.Conn.
func (l *Conn) Close(context.Context) (wire.Totals, error) {
	l.pruning.Close()
	return l.Recv.Totals(), nil
}

// write writes batch b's files (or applies a final batch's entries) and
// returns what commits them.
func (l *Conn) write(ctx context.Context, b *model.Batch, final bool) (send.Result, func() *wire.BatchAck, error) {
	res := send.Result{Batch: b, Final: final}
	recvEntries := l.received(b)
	t := l.Recv.Begin(recvEntries)
	if final {
		t.SetXattrs(l.Src.EntryXattrs(b.Entries, func(e source.Error) { res.SrcErrors = append(res.SrcErrors, e) }))
		t.ApplyFinal()
		return res, func() *wire.BatchAck { return t.Commit(b.ID, nil) }, nil
	}
	var sums []wire.Sum
	if l.Recv.Checksums() {
		sums = l.Src.Sums(b.Entries)
	}
	need, items := l.Recv.NeedItems(recvEntries, sums)
	t.SetItems(items)
	res.Need = need
	var files []int
	for i := range b.Entries {
		switch {
		case b.Entries[i].Kind != model.KindFile:
			t.Apply(i)
		case !need[i]:
			t.Skip(i)
		default:
			files = append(files, i)
		}
	}
	// One file at a time where opens and creates are fast; on a slow
	// filesystem (either side), many at once, each worker with its own
	// open source directory.
	width := max(l.Src.IO.Width(), l.Recv.IOWidth())
	early := l.Recv.IOWidth() > 1
	dirs := source.SharedDirs()
	defer dirs.Close()
	var mu sync.Mutex
	var discards []wire.Discard
	ioconc.ForEach(len(files), width, func(_, k int) {
		if ctx.Err() != nil {
			return // the batch is aborted below
		}
		i := files[k]
		e := &b.Entries[i]
		if width > 1 { // the job's streams together stay within the limit
			l.Src.IO.Acquire()
			defer l.Src.IO.Release()
		}
		f, err := l.Src.OpenIn(dirs, e)
		if err != nil {
			mu.Lock()
			res.SrcErrors = append(res.SrcErrors, source.Error{Index: i, Err: err})
			mu.Unlock()
			return
		}
		defer f.Close()
		// A failed Write has recorded its error and removed its file.
		var ext []wire.Extent
		var xs []wire.Xattr
		var xerr error
		if !e.IsRange() { // a split file's ranges go bare
			ext, xs, xerr = l.Src.Extras(f, e) // a sparse map, extended attributes
		} else if err := f.SeekTo(e.Off); err != nil {
			mu.Lock()
			res.SrcErrors = append(res.SrcErrors, source.Error{Index: i, Err: err})
			mu.Unlock()
			return
		}
		if xerr != nil {
			mu.Lock()
			res.SrcErrors = append(res.SrcErrors, source.Error{Index: i, Err: xerr})
			mu.Unlock()
		}
		r := source.DataReader(f, ext)
		if l.Src.Limit != nil || l.Limit.Rate() > 0 {
			// Paced, a batch may take long: the job's end (--grace over,
			// a second ^C) stops the file between two reads, as a lost
			// connection stops a remote one. Unpaced, the file goes by
			// copy_file_range, which a wrapper would hide, and the end is
			// seen between files.
			r = ctxReader{ctx, r}
		}
		r = ratelimit.Reader(r, l.Src.Limit)
		if l.Limit.Rate() > 0 {
			r = l.paced(r)
		}
		if ext != nil || xs != nil {
			r = &extract.FileData{R: r, Extents: ext, Xattrs: xs}
		}
		// On a slow destination a file goes into place as soon as it is
		// written and its source found unchanged: the links go on while
		// the batch's other files are written (most into the same
		// directory, whose lock takes the links one at a time), not all
		// after them.
		var cerr error
		checked := false
		var placeNow func() bool
		if early {
			placeNow = func() bool {
				checked, cerr = true, l.Src.Recheck(f, e)
				return cerr == nil
			}
		}
		werr := t.WriteThen(i, r, placeNow)
		if !checked {
			cerr = l.Src.Recheck(f, e)
		}
		if cerr == nil {
			return
		}
		if werr != nil {
			// The source changed (shrank, say): the sender's error.
			t.Withdraw(i)
		}
		mu.Lock()
		res.SrcErrors = append(res.SrcErrors, source.Error{Index: i, Err: cerr})
		if werr == nil {
			discards = append(discards, wire.Discard{Index: i, Reason: cerr.Error()})
		}
		mu.Unlock()
	})
	if err := ctx.Err(); err != nil {
		// Not acknowledged, so not in the journal: the files not in
		// place yet go (none stays half-written under its name), and
		// the batch goes again on the next run.
		t.Abort()
		return res, nil, err
	}
	return res, func() *wire.BatchAck { return t.Commit(b.ID, discards) }, nil
}

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// paced is r paced by the job's limit, its reads accounted as reading the
// source and its waits for the bucket as blocked sending.
func (l *Conn) paced(r io.Reader) io.Reader {
	if l.ctr == nil {
		return ratelimit.Reader(r, l.Limit)
	}
	var read atomic.Int64
	return &pacedReader{r: ratelimit.Reader(timedReader{r, &read}, l.Limit), read: &read, ctr: l.ctr}
}

type pacedReader struct {
	r    io.Reader
	read *atomic.Int64 // the source's share of the time in r
	ctr  *send.Counters
}

func (p *pacedReader) Read(b []byte) (int, error) {
	start := time.Now()
	read0 := p.read.Load()
	n, err := p.r.Read(b)
	read := p.read.Load() - read0
	p.ctr.ReadNanos.Add(read)
	p.ctr.SendNanos.Add(max(int64(time.Since(start))-read, 0))
	return n, err
}

// Prune implements send.Pruner.
func (l *Conn) Prune(ctx context.Context, req *wire.PruneRequest, done func(*wire.PruneResult)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := receive.ApplyPrune(l.Recv, &l.pruning, req, func(r *wire.PruneResult) error {
		done(r)
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	done(res)
	return nil
}

// received returns b's entries as the receiver installs them (owners
// mapped, modes changed: extract.Translate), a copy where they change: the
// sending side reads and rechecks the files by its own.
func (l *Conn) received(b *model.Batch) []model.Entry {
	if !l.Recv.Translating() {
		return b.Entries
	}
	return l.Recv.Translate(slices.Clone(b.Entries), l.Src.OwnerNames(b.Entries))
}

// Verify implements send.Verifier.
func (l *Conn) Verify(ctx context.Context, in <-chan *model.Batch, content bool, done func(send.Result)) error {
	return l.each(ctx, in, content, func(b *model.Batch, s []wire.Sum) *wire.BatchAck {
		return &wire.BatchAck{ID: b.ID, Errors: l.Recv.Verify(l.received(b), s)}
	}, done)
}

// each answers the batches from in with ack, given their files' content
// hashes if sums is set, until in is closed.
func (l *Conn) each(ctx context.Context, in <-chan *model.Batch, sums bool, ack func(*model.Batch, []wire.Sum) *wire.BatchAck, done func(send.Result)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-in:
			if !ok {
				return nil
			}
			var s []wire.Sum
			if sums {
				s = l.Src.Sums(b.Entries)
			}
			done(send.Result{Batch: b, Ack: ack(b, s)})
		}
	}
}

// Would implements send.Itemizer.
func (l *Conn) Would(ctx context.Context, in <-chan *model.Batch, sums bool, done func(send.Result)) error {
	return l.each(ctx, in, sums, func(b *model.Batch, s []wire.Sum) *wire.BatchAck {
		return &wire.BatchAck{ID: b.ID, Items: l.Recv.Would(l.received(b), s)}
	}, done)
}
