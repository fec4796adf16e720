package extract

// Creating small files a group at a time: on a fast filesystem (files
// written one at a time), the small files of a batch that go under their
// final names in directories this receiver made (see createInPlace) are
// read off the stream into memory and created and written through
// io_uring, a group in two system calls rather than an openat and a
// write each, with the same flags (O_EXCL, O_NOFOLLOW). Each is then
// finished one by one, as WriteThen finishes any other (metadata; its
// descriptor held for the commit, which sets its mtime: futimens has no
// io_uring form). A file whose create fails (its name taken meanwhile,
// by a symlink or anything else) is written the usual way, from memory,
// which replaces what took it at the commit.
//
// io_uring makes every open with O_CREAT, and on tmpfs every write, on
// its worker threads (threads of this process, counted in its CPU time),
// and each completion from there wakes the submitting thread: writes
// alone through the ring, the opens one by one, cost more CPU in all
// than the calls they save; opens and writes together, less.

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/uring"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// The group: at most createGroup files, createArena bytes of data; a file
// larger than createMax is written as it arrives.
const (
	createGroup = uring.Entries / 2
	createMax   = 32 << 10
	createArena = 256 << 10
)

// beforeRingCreate, if set, is called with each group before its files
// are created, and ringCreated counts the files the ring created: how
// tests race a group and see that it went through the ring.
var (
	beforeRingCreate func(files []uring.NewFile)
	ringCreated      atomic.Int64
)

// createQueue holds the files read and not yet created (ExtractTar's, on
// one goroutine).
type createQueue struct {
	ring   *uring.Ring
	broken bool
	files  []uring.NewFile
	queued []queuedFile
	arena  []byte
}

// arenas keeps create queues' arenas from batch to batch: for each batch
// of small files the runtime would otherwise allocate and clear
// createArena bytes. An arena goes back only once its queue is flushed:
// each file's data is written (or failed) by then, and nothing holds it.
var arenas = sync.Pool{New: func() any { return new([createArena]byte) }}

// queuedFile is the rest of what finishing a queued file takes.
type queuedFile struct {
	i      int
	td     *txnDir
	sum    wire.Sum
	summed bool
}

// startQueue sets up the create queue for ExtractTar, where files are
// written one at a time on this goroutine (no writers) and io_uring is
// there; nil otherwise, and with a write rate (Options.WriteRate: paced
// writes are timed as the receiver's, one by one).
func (t *Txn) startQueue() *createQueue {
	if t.r.opt.Fsync || landSlow(t.r) || t.r.limit.Rate() > 0 {
		return nil
	}
	ring := uring.Get()
	if ring == nil {
		return nil
	}
	return &createQueue{ring: ring, arena: arenas.Get().(*[createArena]byte)[:0]}
}

// stopQueue creates what is queued and gives the ring back.
func (t *Txn) stopQueue(q *createQueue) {
	if q == nil {
		return
	}
	t.flush(q)
	t.q = nil
	uring.Put(q.ring, q.broken)
	arenas.Put((*[createArena]byte)(q.arena[:createArena]))
	q.arena = nil
}

// queues reports whether entry e, whose data src holds (x its extras),
// goes into the create queue.
func (t *Txn) queues(src io.Reader, x *FileData, e *model.Entry) bool {
	if t.q == nil || t.q.broken || x != nil || e.Size <= 0 || e.Size > createMax {
		return false
	}
	if _, ok := src.(*tarReader); !ok {
		return false
	}
	return !t.r.opt.Fsync && t.r.made(path.Dir(e.Path))
}

// enqueue takes entry i's body off src into the queue, hashed, and
// creates the queue's files once it is full. The error is the stream's,
// as WriteThen's.
func (t *Txn) enqueue(i int, e *model.Entry, td *txnDir, base string, src *tarReader) error {
	q := t.q
	size := int(e.Size)
	if len(q.files) == createGroup || len(q.arena)+size > cap(q.arena) {
		t.flush(q)
	}
	body := q.arena[len(q.arena) : len(q.arena)+size]
	if b := src.buffered(e.Size); b != nil {
		copy(body, b)
		src.take(size)
	} else if n, err := io.ReadFull(src, body); err != nil {
		// The stream ended or failed: as WriteThen says it.
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("receive %s: the source shrank while being read: got %d of %d bytes", e.Path, n, size)
		} else {
			err = fmt.Errorf("receive %s: %w", e.Path, err)
		}
		t.fail(i, wire.CodeOther, err)
		return err
	}
	q.arena = q.arena[:len(q.arena)+size]
	qf := queuedFile{i: i, td: td}
	if !t.r.opt.NoSums {
		h := hasherPool.Get().(*xxh3.Hasher128)
		h.Reset()
		h.Write(body)
		qf.sum, qf.summed = h.Sum128().Bytes(), true
		hasherPool.Put(h)
	}
	t.r.setWriting(e.Path, true)
	q.files = append(q.files, uring.NewFile{Dir: int(td.f.Fd()), Name: base, Perm: uint32(e.Mode.Perm()), Data: body,
		Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC})
	q.queued = append(q.queued, qf)
	return nil
}

// flush creates and writes the queue's files, finishes each, and empties
// the queue.
func (t *Txn) flush(q *createQueue) {
	if len(q.files) == 0 {
		return
	}
	if beforeRingCreate != nil {
		beforeRingCreate(q.files)
	}
	start := time.Now()
	if !q.broken && q.ring.Create(q.files) != nil {
		// The ring failed: what it created goes, and every file the
		// usual way.
		q.broken = true
		for k := range q.files {
			if f := &q.files[k]; f.Fd >= 0 {
				var st unix.Stat_t
				if unix.Fstat(f.Fd, &st) == nil {
					unlinkIno(f.Dir, f.Name, st.Ino)
				}
				unix.Close(f.Fd)
				f.Fd = -1
			}
		}
	}
	took := time.Since(start)
	t.r.io.Observe(took / time.Duration(len(q.files)))
	t.mu.Lock()
	t.writeNanos += int64(took)
	t.mu.Unlock()
	for k := range q.files {
		f, qf := &q.files[k], &q.queued[k]
		e := &t.entries[qf.i]
		if f.Fd < 0 || q.broken {
			// Its name taken meanwhile (or the ring failed): written
			// as any other, which replaces what took it.
			t.r.setWriting(e.Path, false)
			t.WriteThen(qf.i, bytes.NewReader(f.Data), nil)
			continue
		}
		ringCreated.Add(1)
		nf := newFile{i: qf.i, d: qf.td.f, dfd: f.Dir, tdir: f.Dir, tmp: f.Name, base: f.Name, fd: f.Fd, sys: qf.td.sys}
		err := f.Err
		if err == nil && f.N < len(f.Data) {
			err = writeAllWith(nf.sys, nf.fd, f.Data[f.N:])
		}
		if err != nil {
			t.discard(&nf)
			t.failErr(qf.i, "write", e.Path, err)
			continue
		}
		t.finish(&nf, qf.sum, qf.summed, nil, nil)
	}
	clear(q.files) // (the names and data: not kept past the batch)
	q.files, q.queued, q.arena = q.files[:0], q.queued[:0], q.arena[:0]
}
