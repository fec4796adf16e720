// Package hashidx keeps 64-bit hashes, each with an optional 64-bit value,
// in sorted tables on disk, so that a set or map of tens of millions of
// them costs little memory: a Table is one unlinked temporary file of
// fixed-size records sorted by hash, and in memory only the first hash of
// each 4 KiB block (8 bytes per 256 or 512 records). A lookup reads the one
// block that can hold its hash: a random read of 4 KiB, which the page
// cache serves while the machine has memory to spare (the file was just
// written), and the disk otherwise.
//
// Set builds on Tables a set that takes additions at any time: up to a
// limit in memory, the rest in Tables merged as they grow.
//
// The journal's index beyond its MemEntries (journal/disk.go) and the
// receiver's set of hard-link targets (receive/extract) use it.
package hashidx

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"sort"
	"sync"
)

// blockBytes is what a lookup reads: one block of records.
const blockBytes = 4096

// Table is a read-only table of records sorted by hash, one per hash, in
// an unlinked temporary file. Lookup may be called from several
// goroutines at once.
type Table struct {
	f      *os.File
	n      int64    // records
	rec    int64    // bytes a record: 8 (hash) or 16 (hash, value)
	per    int64    // records a block
	fences []uint64 // fences[i] is the hash of record i*per
}

var blockPool = sync.Pool{New: func() any { return new([blockBytes]byte) }}

// Len is the number of records.
func (t *Table) Len() int64 {
	if t == nil {
		return 0
	}
	return t.n
}

// Lookup returns the value recorded for h (0 in a table without values)
// and whether h is there. An error is a failure to read the file.
func (t *Table) Lookup(h uint64) (val uint64, ok bool, err error) {
	if t == nil {
		return 0, false, nil
	}
	i := sort.Search(len(t.fences), func(i int) bool { return t.fences[i] > h }) - 1
	if i < 0 {
		return 0, false, nil
	}
	n := min(t.per, t.n-int64(i)*t.per)
	bp := blockPool.Get().(*[blockBytes]byte)
	defer blockPool.Put(bp)
	b := bp[:n*t.rec]
	if _, err := t.f.ReadAt(b, int64(i)*t.per*t.rec); err != nil {
		return 0, false, fmt.Errorf("hash index: reading %s: %w", t.f.Name(), err)
	}
	rec := int(t.rec)
	k := sort.Search(int(n), func(k int) bool { return binary.LittleEndian.Uint64(b[k*rec:]) >= h })
	if k == int(n) || binary.LittleEndian.Uint64(b[k*rec:]) != h {
		return 0, false, nil
	}
	if rec == 16 {
		val = binary.LittleEndian.Uint64(b[k*rec+8:])
	}
	return val, true, nil
}

// Pair is one record: a hash and its value.
type Pair struct{ Key, Val uint64 }

// All yields the records in order; a failure to read them is yielded
// last, with a zero Pair.
func (t *Table) All() iter.Seq2[Pair, error] {
	return func(yield func(Pair, error) bool) {
		c := t.cursor()
		for {
			p, ok, err := c.next()
			if err != nil {
				yield(Pair{}, err)
				return
			}
			if !ok || !yield(p, nil) {
				return
			}
		}
	}
}

// cursor reads a table's records in order.
type cursor struct {
	t    *Table
	r    *bufio.Reader
	left int64
	b    [16]byte
}

func (t *Table) cursor() *cursor {
	c := &cursor{t: t}
	if t != nil {
		c.left = t.n
		c.r = bufio.NewReaderSize(io.NewSectionReader(t.f, 0, t.n*t.rec), 256<<10)
	}
	return c
}

// next returns the next record; false at the end.
func (c *cursor) next() (Pair, bool, error) {
	if c.left == 0 {
		return Pair{}, false, nil
	}
	t := c.t
	if _, err := io.ReadFull(c.r, c.b[:t.rec]); err != nil {
		c.left = 0
		return Pair{}, false, fmt.Errorf("hash index: reading back %s: %w", t.f.Name(), err)
	}
	c.left--
	p := Pair{Key: binary.LittleEndian.Uint64(c.b[0:8])}
	if t.rec == 16 {
		p.Val = binary.LittleEndian.Uint64(c.b[8:16])
	}
	return p, true, nil
}

// FenceBytes is the memory the table keeps: its fences.
func (t *Table) FenceBytes() int64 {
	if t == nil {
		return 0
	}
	return int64(cap(t.fences)) * 8
}

// Close releases the file (it has no name on disk already).
func (t *Table) Close() error {
	if t == nil || t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}

// Writer writes a Table, record by record, in increasing order of hash.
type Writer struct {
	t   *Table
	w   *bufio.Writer
	rec [16]byte
	err error
}

// NewWriter starts a table in an unlinked temporary file in dir (""
// os.TempDir()); values says whether its records carry a value.
func NewWriter(dir string, values bool) (*Writer, error) {
	f, err := os.CreateTemp(dir, ".bulkmove-index-*")
	if err != nil {
		return nil, fmt.Errorf("hash index: %w", err)
	}
	os.Remove(f.Name()) // unlinked: nothing is left behind, however the process ends
	t := &Table{f: f, rec: 8}
	if values {
		t.rec = 16
	}
	t.per = blockBytes / t.rec
	return &Writer{t: t, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// Add appends the record (h, val); h must be greater than the hash added
// before (val is ignored in a table without values).
func (w *Writer) Add(h, val uint64) error {
	if w.err != nil {
		return w.err
	}
	t := w.t
	if t.n > 0 && h <= w.last() {
		w.err = errors.New("hash index: hashes added out of order")
		return w.err
	}
	if t.n%t.per == 0 {
		t.fences = append(t.fences, h)
	}
	binary.LittleEndian.PutUint64(w.rec[0:8], h)
	binary.LittleEndian.PutUint64(w.rec[8:16], val)
	if _, err := w.w.Write(w.rec[:t.rec]); err != nil {
		w.err = fmt.Errorf("hash index: writing %s: %w", t.f.Name(), err)
		return w.err
	}
	t.n++
	return nil
}

// last is the hash of the record added last.
func (w *Writer) last() uint64 { return binary.LittleEndian.Uint64(w.rec[0:8]) }

// Finish writes out what is buffered and returns the table; after an
// error the file is released.
func (w *Writer) Finish() (*Table, error) {
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("hash index: writing %s: %w", w.t.f.Name(), err)
		}
	}
	if w.err != nil {
		w.t.Close()
		return nil, w.err
	}
	w.t.fences = append([]uint64(nil), w.t.fences...) // no slack kept
	return w.t, nil
}

// Abort releases the file of a table not finished.
func (w *Writer) Abort() { w.t.Close() }
