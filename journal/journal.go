// Package journal is the sender's resume journal: a file of the batches the
// receiver has acknowledged, so that rerunning an interrupted job (the sender
// or the agent killed with SIGKILL, the network cut) does not send again what
// has already landed.
//
// # Use
//
// The sender opens the journal of its job (DefaultPath, or --journal PATH)
// before it starts, asks Done for every file the walk finds (one already
// acknowledged is still offered to the receiver, whose check of DEST
// decides; the journal only says it need not be recorded again), calls
// Append for each batch as its acknowledgement arrives, and at the end calls Finish if the job completed
// without errors (the journal is removed) or Close otherwise (it is kept for
// the next run). An open journal is locked (flock, exclusive, non-blocking):
// a second bulkmove on the same journal fails at Open instead of corrupting
// it. The kernel drops the lock when the process dies, however it dies.
//
// # Format
//
// The file starts with an 8-byte header, "BMJRNL\x00" and a version byte (1).
// Records follow, one per acknowledged batch (a batch of more than
// MaxRecordEntries files takes several), each:
//
//	uint32 n      payload length in bytes, a non-zero multiple of 16
//	uint32 crc    CRC-32C (Castagnoli) of the 4 bytes of n, then the payload
//	payload       n/16 entries of: uint64 path hash, uint64 fingerprint
//
// all little-endian. The path hash is XXH64 of the path as the caller gives
// it (sharder's slash-separated path relative to the source); the
// fingerprint is XXH64 of the size, the modification time in nanoseconds and
// the file type bits (fs.FileMode.Type) as 8+8+4 little-endian bytes. Paths
// are not stored: a file costs 16 bytes, a batch 8 more. A record of one
// entry binds the journal to its destination (Destination): the path hash
// of "\x00destination" (no walk's path holds a NUL), and the fingerprint
// of a size that is XXH64 of the destination's identity.
//
// # Guarantees
//
// Append returns only after its records are written and fdatasync'ed (fsync
// where there is no fdatasync), so an acknowledged batch survives a crash of
// the sender, and of the machine where the disk honours flushes. Concurrent
// Appends (K streams acknowledging at once) are grouped: records that arrive
// while a sync is in flight are written and synced together by the next one.
// A crash in the middle of an Append leaves at worst a torn last record (or
// zeroes past the end, after a power loss): Open reads records up to the
// first one that is short, has a bad length or fails its CRC, truncates the
// file there (Dropped says how much) and loads the rest, so the next run
// works and only resends the batches that were cut off. A corrupt record in
// the middle of the file likewise ends what is loaded; everything after it
// is sent again.
//
// A failure to write or sync (a full disk, an I/O error) is returned by
// Append with the journal's path in it and sticks: every later Append fails
// too, since what reached the disk is no longer known. The next Open drops
// whatever partial record it left.
//
// # Memory
//
// Done answers from an index of what earlier runs recorded, built at Open
// and read-only afterwards (Done takes no lock): the (path hash, fingerprint)
// pairs, 16 bytes each, grouped by bucket of the hash, plus a 4-byte offset
// per bucket of about eight pairs, so about 16.5 bytes a file, up to
// MemEntries files (66 MiB). Past MemEntries, the files whose hash is above
// a split point go to a disk index instead (see disk.go): one 4 KiB read
// for a lookup there, 8 bytes of memory per 256 files. Records appended in
// this run go to the file only; Done does not see them (the walk of one
// run does not meet a path twice).
//
// # Collisions
//
// Done can wrongly say yes (the file is still offered to the receiver, but
// not recorded again) only if another path acknowledged earlier has the
// same 64-bit path hash and also the same fingerprint, or if the file itself changed since it was acknowledged and
// its new size, mtime and type hash to its old fingerprint (2^-64 per
// changed file). With n files in the journal and m files looked up, the
// first kind has a chance of at most m*n/2^64 even assuming every
// fingerprint matches (trees unpacked from one archive share mtimes):
// 5.4e-6 for a resume of 10 million files into a journal of 10 million,
// and another factor near 2^-64 when fingerprints differ. A collision in
// the other direction only makes Done say no, and the file is recorded again.
package journal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/bulkmove/bulkmove/internal/hashidx"
)

// Entry is one acknowledged file.
type Entry struct {
	Path  string // as the walk names it; Done must be asked with the same form
	Size  int64
	MTime int64  // modification time, Unix nanoseconds
	Mode  uint32 // an fs.FileMode; only its type bits (Mode.Type()) are recorded
}

// MaxRecordEntries is the most entries one record holds (1 MiB of payload);
// Append splits a larger batch into several records.
const MaxRecordEntries = 1 << 16

const (
	headerLen = 8
	recHdrLen = 8
	entryLen  = 16
)

var (
	header = [headerLen]byte{'B', 'M', 'J', 'R', 'N', 'L', 0, 1}
	castag = crc32.MakeTable(crc32.Castagnoli)
)

// ErrLocked is returned (wrapped, with the path) by Open when another process,
// or another Open in this one, holds the journal.
var ErrLocked = errors.New("another bulkmove is using it")

// ErrNotJournal is returned (wrapped, with the path) by Open when the file
// exists but is not a journal of this version; it is left untouched.
var ErrNotJournal = errors.New("not a bulkmove journal")

var errClosed = errors.New("journal is closed")

// Journal is an open, locked journal. Its methods are safe for concurrent use.
type Journal struct {
	path  string
	idx   index          // read-only after Open
	disk  *hashidx.Table // the hashes at or above split, if MemEntries were too few
	split uint64

	loadedBatches, loadedFiles, dropped int64

	mu       sync.Mutex
	cond     sync.Cond // signalled when a flush ends
	f        *os.File
	size     int64  // bytes durable in the file
	pending  []byte // records waiting for the next flush
	spare    []byte // the previous flush's buffer, for reuse
	queued   uint64 // Appends queued so far; the last one is in pending
	synced   uint64 // Appends whose records are durable
	flushing bool
	flushes  uint64 // writes+syncs done, for tests of the grouping
	err      error  // sticky write failure
	closed   bool
}

// Open opens the journal at path, creating it and its parent directories
// (mode 0700) if need be, locks it, and loads what earlier runs recorded.
// A torn or corrupt tail is cut off; see Dropped.
func Open(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	j := &Journal{path: path}
	j.cond.L = &j.mu
	for try := 0; ; try++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, j.wrap("open", err)
		}
		j.f = f
		if err := lockFile(f); err != nil {
			f.Close()
			if errors.Is(err, ErrLocked) {
				return nil, fmt.Errorf("journal %s: %w", path, ErrLocked)
			}
			return nil, j.wrap("lock", err)
		}
		// The run that held the lock may have finished and removed the
		// file between our open and our lock: then lock the new one.
		same, err := isCurrent(f, path)
		if err != nil {
			f.Close()
			return nil, j.wrap("stat", err)
		}
		if same {
			break
		}
		f.Close()
		if try == 10 {
			return nil, fmt.Errorf("journal %s: %w (the file keeps being replaced)", path, ErrLocked)
		}
	}
	if err := j.load(); err != nil {
		j.disk.Close()
		j.f.Close() // releases the lock
		return nil, err
	}
	return j, nil
}

// wrap names the journal and the operation in err, keeping the cause
// (errors.Is(err, syscall.ENOSPC) holds) without repeating the path.
func (j *Journal) wrap(op string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("journal %s: %s: %w", j.path, op, err)
}

func (j *Journal) load() error {
	fi, err := j.f.Stat()
	if err != nil {
		return j.wrap("stat", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("journal %s: %w (not a regular file)", j.path, ErrNotJournal)
	}
	size := fi.Size()
	if size < headerLen {
		// New, or its header write was cut short.
		var got [headerLen]byte
		if _, err := j.f.ReadAt(got[:size], 0); err != nil && err != io.EOF {
			return j.wrap("read", err)
		}
		if !bytes.HasPrefix(header[:], got[:size]) {
			return fmt.Errorf("journal %s: %w", j.path, ErrNotJournal)
		}
		if err := j.f.Truncate(0); err != nil {
			return j.wrap("truncate", err)
		}
		if _, err := j.f.WriteAt(header[:], 0); err != nil {
			return j.wrap("write", err)
		}
		if err := datasync(j.f); err != nil {
			return j.wrap("sync", err)
		}
		if err := syncDir(filepath.Dir(j.path)); err != nil {
			return j.wrap("sync directory", err)
		}
		j.size = headerLen
		return nil
	}
	var got [headerLen]byte
	if _, err := j.f.ReadAt(got[:], 0); err != nil {
		return j.wrap("read", err)
	}
	if !bytes.Equal(got[:headerLen-1], header[:headerLen-1]) {
		return fmt.Errorf("journal %s: %w", j.path, ErrNotJournal)
	}
	if got[headerLen-1] != header[headerLen-1] {
		return fmt.Errorf("journal %s: %w (version %d, want %d)", j.path, ErrNotJournal, got[headerLen-1], header[headerLen-1])
	}

	// Pass 1 finds the valid records and counts their hashes by bucket;
	// pass 2 places them, so the index is allocated once at its exact size.
	// A journal that may hold more than MemEntries files is counted first
	// (a pass of its own): past MemEntries, the files whose hash is at or
	// above a split point go to the disk index instead.
	limit := max(MemEntries, 1)
	var b *builder
	count := func(h, fp uint64) {}
	if bound := (size - headerLen) / entryLen; bound <= limit {
		b = newBuilder(bound)
		count = b.count
	}
	end, recs, files, err := scan(io.NewSectionReader(j.f, headerLen, size-headerLen), count)
	if err != nil {
		return j.wrap("read", err)
	}
	end += headerLen
	if min(files, limit+limit/8) > math.MaxUint32 {
		return fmt.Errorf("journal %s: %d files, more than this version can load", j.path, files)
	}
	if end < size {
		if err := j.cut(end); err != nil {
			return err
		}
		j.dropped = size - end
	}
	valid := func() io.Reader { return io.NewSectionReader(j.f, headerLen, end-headerLen) }
	inMem := func(h uint64) bool { return true }
	spilling := false
	if b == nil {
		if files > limit {
			spilling = true
			// The hashes are uniform: about limit of them fall below.
			j.split = uint64(math.Ldexp(float64(limit)/float64(files), 64))
			inMem = func(h uint64) bool { return h < j.split }
		}
		b = newBuilder(min(files, limit+limit/8))
		if _, _, _, err := scan(valid(), func(h, fp uint64) {
			if inMem(h) {
				b.count(h, fp)
			}
		}); err != nil {
			return j.wrap("read", err)
		}
	}
	b.alloc()
	var db *diskBuilder
	if spilling {
		db = newDiskBuilder(filepath.Dir(j.path))
	}
	end2, recs2, files2, err := scan(valid(), func(h, fp uint64) {
		if inMem(h) {
			b.place(h, fp)
		} else {
			db.add(h, fp)
		}
	})
	if err != nil {
		if db != nil {
			db.l.Close()
		}
		return j.wrap("read", err)
	}
	if end2+headerLen != end || recs2 != recs || files2 != files {
		if db != nil {
			db.l.Close()
		}
		return fmt.Errorf("journal %s: changed while being loaded", j.path)
	}
	if db != nil {
		if j.disk, err = db.index(); err != nil {
			return j.wrap("disk index", err)
		}
	}
	j.idx = b.index()
	j.size = end
	j.loadedBatches, j.loadedFiles = recs, files
	return nil
}

// cut truncates the file to n bytes, durably.
func (j *Journal) cut(n int64) error {
	if err := j.f.Truncate(n); err != nil {
		return j.wrap("truncate", err)
	}
	if err := datasync(j.f); err != nil {
		return j.wrap("sync", err)
	}
	return nil
}

// scan reads records from r until the first torn or corrupt one, or the end,
// and calls fn with every entry of each valid record. It returns the length
// of the valid records, their number and the number of entries in them. Only
// a read error other than the end of the data is an error.
func scan(r io.Reader, fn func(h, fp uint64)) (end, recs, entries int64, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [recHdrLen]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return end, recs, entries, nil
			}
			return end, recs, entries, err
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n == 0 || n%entryLen != 0 || n > MaxRecordEntries*entryLen {
			return end, recs, entries, nil
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n, MaxRecordEntries*entryLen)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return end, recs, entries, nil
			}
			return end, recs, entries, err
		}
		if recordCRC(hdr[0:4], payload) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return end, recs, entries, nil
		}
		for p := payload; len(p) > 0; p = p[entryLen:] {
			fn(binary.LittleEndian.Uint64(p[0:8]), binary.LittleEndian.Uint64(p[8:16]))
		}
		end += recHdrLen + int64(n)
		recs++
		entries += int64(n / entryLen)
	}
}

// isCurrent reports whether f is still the file at path.
func isCurrent(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

func recordCRC(n, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(n, castag), castag, payload)
}

func pathHash(path string) uint64 { return xxhash.Sum64String(path) }

func fingerprint(size, mtime int64, mode uint32) uint64 {
	var b [20]byte
	binary.LittleEndian.PutUint64(b[0:8], uint64(size))
	binary.LittleEndian.PutUint64(b[8:16], uint64(mtime))
	binary.LittleEndian.PutUint32(b[16:20], uint32(fs.FileMode(mode).Type()))
	return xxhash.Sum64(b[:])
}

// Path returns the journal's file name.
func (j *Journal) Path() string { return j.path }

// Loaded returns the number of batches (records) and files that Open loaded
// from earlier runs.
func (j *Journal) Loaded() (batches, files int64) { return j.loadedBatches, j.loadedFiles }

// Dropped returns the number of bytes Open cut off the end of the file: a
// record torn by a crash, or everything from the first corrupt record on.
func (j *Journal) Dropped() int64 { return j.dropped }

// Done reports whether an earlier run recorded path as acknowledged with the
// same size, modification time (Unix nanoseconds) and file type (mode is an
// fs.FileMode; permission bits are ignored). If the path was recorded more
// than once, the last record counts. It does not see this run's Appends.
func (j *Journal) Done(path string, size, mtimeNs int64, mode uint32) bool {
	fp, ok := j.lookup(path)
	return ok && fp == fingerprint(size, mtimeNs, mode)
}

// lookup returns the fingerprint last recorded for path by earlier runs.
func (j *Journal) lookup(path string) (fp uint64, ok bool) {
	h := pathHash(path)
	if j.disk != nil && h >= j.split {
		fp, ok, _ = j.disk.Lookup(h) // unreadable: not done, sent again
		return fp, ok
	}
	return j.idx.lookup(h)
}

// destPath is the path under which Destination records the destination:
// no path of a walk holds a NUL.
const destPath = "\x00destination"

// Destination binds the journal to the destination its records are of. id
// names that destination as its receiver sees it (its filesystem, and its
// root directory's inode, birth time and generation: the string of
// extract.Receiver.Identity), so that a destination deleted
// and made anew, or another one at the same name, has another id. A
// journal whose records name another destination, or none (those of an
// earlier version), is emptied before any Done: what it says landed may
// not be there any more, and files it would have left out would be
// missing from the copy with nothing said (the quick check then finds
// those still in place). dropped is how many files it held. The journal
// then records id. Call Destination once, before Done and Append; an
// empty id (a receiver that cannot tell) binds nothing and empties nothing.
func (j *Journal) Destination(id string) (dropped int64, err error) {
	if id == "" {
		return 0, nil
	}
	bind := Entry{Path: destPath, Size: int64(xxhash.Sum64String(id))}
	if j.Done(bind.Path, bind.Size, 0, 0) {
		// (Loaded counts the files of the walk.)
		j.loadedBatches--
		j.loadedFiles--
		return 0, nil
	}
	if j.loadedFiles > 0 {
		j.mu.Lock()
		err := j.err
		if err == nil && j.size > headerLen {
			if err = j.cut(headerLen); err == nil {
				j.size = headerLen
			}
		}
		j.mu.Unlock()
		if err != nil {
			return 0, err
		}
		dropped = j.loadedFiles
		if _, bound := j.lookup(destPath); bound {
			dropped-- // another destination's binding
		}
		j.disk.Close()
		j.idx, j.disk, j.split = index{}, nil, 0
		j.loadedBatches, j.loadedFiles = 0, 0
	}
	return dropped, j.Append([]Entry{bind})
}

// encode returns entries as records, split at MaxRecordEntries.
func encode(entries []Entry) []byte {
	recs := (len(entries) + MaxRecordEntries - 1) / MaxRecordEntries
	buf := make([]byte, recs*recHdrLen+len(entries)*entryLen)
	p := buf
	for len(entries) > 0 {
		e := entries[:min(len(entries), MaxRecordEntries)]
		entries = entries[len(e):]
		n := len(e) * entryLen
		rec, body := p[:recHdrLen+n], p[recHdrLen:recHdrLen+n]
		p = p[len(rec):]
		for i := range e {
			binary.LittleEndian.PutUint64(body[i*entryLen:], pathHash(e[i].Path))
			binary.LittleEndian.PutUint64(body[i*entryLen+8:], fingerprint(e[i].Size, e[i].MTime, e[i].Mode))
		}
		binary.LittleEndian.PutUint32(rec[0:4], uint32(n))
		binary.LittleEndian.PutUint32(rec[4:8], recordCRC(rec[0:4], body))
	}
	return buf
}

// Append records one acknowledged batch and returns once it is durable. It
// is safe to call from several goroutines: appends that arrive while another
// is syncing are written and synced together by one of them. An empty batch
// records nothing.
func (j *Journal) Append(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	rec := encode(entries)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return j.wrap("append", errClosed)
	}
	if j.err != nil {
		return j.err
	}
	j.pending = append(j.pending, rec...)
	j.queued++
	mine := j.queued
	for j.synced < mine {
		if j.err != nil {
			return j.err
		}
		if j.flushing {
			j.cond.Wait()
			continue
		}
		j.flush()
	}
	return nil
}

// flush writes and syncs everything pending. It is called with j.mu held and
// j.flushing false, and drops the lock during the I/O.
func (j *Journal) flush() {
	buf, upto, off := j.pending, j.queued, j.size
	j.pending, j.spare = j.spare[:0], nil
	j.flushing = true
	j.mu.Unlock()
	_, err := j.f.WriteAt(buf, off)
	if err != nil {
		err = j.wrap("write", err)
	} else if err = datasync(j.f); err != nil {
		err = j.wrap("sync", err)
	}
	j.mu.Lock()
	j.flushing = false
	j.flushes++
	if err != nil {
		j.err = err
	} else {
		j.size += int64(len(buf))
		j.synced = upto
	}
	if cap(buf) <= 4<<20 {
		j.spare = buf[:0]
	}
	j.cond.Broadcast()
}

// shut waits for queued appends to be written (or to fail) and stops new ones.
func (j *Journal) shut() (already bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return true
	}
	j.closed = true
	for j.flushing || (len(j.pending) > 0 && j.err == nil) {
		j.cond.Wait()
	}
	return false
}

// Close releases the lock and keeps the journal for the next run: the job
// was interrupted or had errors. Close after Close or Finish does nothing.
func (j *Journal) Close() error {
	if j.shut() {
		return nil
	}
	j.disk.Close()
	if err := j.f.Close(); err != nil {
		return j.wrap("close", err)
	}
	return nil
}

// Finish removes the journal and releases the lock: the job completed
// without errors, and a rerun should start afresh. Finish after Close or
// Finish does nothing.
func (j *Journal) Finish() error {
	if j.shut() {
		return nil
	}
	// Remove while still holding the lock: a run that opened the file
	// meanwhile sees, once it has the lock, that the name has gone (Open).
	rmErr := os.Remove(j.path)
	j.disk.Close()
	cErr := j.f.Close()
	if rmErr != nil {
		return j.wrap("remove", rmErr)
	}
	if cErr != nil {
		return j.wrap("close", cErr)
	}
	return nil
}
