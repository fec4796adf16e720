package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/bulkmove/bulkmove/internal/spill"
)

// MemEntries is how many recorded files Open keeps in its in-memory index
// (16.5 bytes each: 66 MiB for the default 4 Mi). A journal of more files
// keeps that many in memory, chosen by path hash (those below a split
// point), and the rest in a disk index: see diskIndex. Set it before Open.
var MemEntries int64 = 4 << 20

// spillMem is how many pairs the sort of the disk index holds in memory
// while Open builds it (16 bytes each).
const spillMem = 1 << 18

// diskBlock is how many records a read of the disk index fetches: 4 KiB.
const diskBlock = 256

// diskIndex is the part of the index beyond what memory holds: the (path
// hash, fingerprint) pairs whose hash is at or above the split point,
// sorted by hash, one per hash (the last recorded), 16 bytes each, in an
// unlinked temporary file beside the journal; in memory only the first
// hash of each block of diskBlock records (8 bytes per 256 files: 0.3 MiB
// for 10 million). A lookup reads the one block that can hold its hash: a
// random read of 4 KiB, which the page cache serves while the machine has
// memory to spare (the file was just written), and the disk otherwise.
//
// Why not a merge join in walk order: the walk is not in any order a
// journal could be sorted by (directories are read in parallel, names in
// readdir order), and the journal holds path hashes, not paths, which
// carry no order at all.
type diskIndex struct {
	f      *os.File
	n      int64    // records
	fences []uint64 // fences[i] is the hash of record i*diskBlock
}

var blockPool = sync.Pool{New: func() any { return new([diskBlock * entryLen]byte) }}

// lookup returns the fingerprint recorded for h. A failure to read the
// file makes it say no: the file is then sent again.
func (d *diskIndex) lookup(h uint64) (fp uint64, ok bool) {
	i := sort.Search(len(d.fences), func(i int) bool { return d.fences[i] > h }) - 1
	if i < 0 {
		return 0, false
	}
	n := min(diskBlock, d.n-int64(i)*diskBlock)
	bp := blockPool.Get().(*[diskBlock * entryLen]byte)
	defer blockPool.Put(bp)
	b := bp[:n*entryLen]
	if _, err := d.f.ReadAt(b, int64(i)*diskBlock*entryLen); err != nil {
		return 0, false
	}
	k := sort.Search(int(n), func(k int) bool { return binary.LittleEndian.Uint64(b[k*entryLen:]) >= h })
	if k == int(n) || binary.LittleEndian.Uint64(b[k*entryLen:]) != h {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[k*entryLen+8:]), true
}

func (d *diskIndex) close() error {
	if d == nil {
		return nil
	}
	return d.f.Close()
}

// diskBuilder gathers the pairs of the disk index in sorted runs
// (internal/spill), then writes them out in order.
type diskBuilder struct {
	dir string
	l   *spill.List[slot]
}

func newDiskBuilder(dir string) *diskBuilder {
	return &diskBuilder{dir: dir, l: spill.New(dir, spillMem, func(a, b *slot) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	}, slotCodec{})}
}

func (b *diskBuilder) add(h, fp uint64) { b.l.Add(slot{h, fp}) }

// index writes the sorted pairs, the last of each hash (the sort keeps
// equal hashes in the order recorded), and releases the runs.
func (b *diskBuilder) index() (*diskIndex, error) {
	defer b.l.Close()
	if err := b.l.Err(); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(b.dir, ".bulkmove-index-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // unlinked: nothing is left behind
	d := &diskIndex{f: f}
	w := bufio.NewWriterSize(f, 1<<20)
	var rec [entryLen]byte
	put := func(s slot) {
		if d.n%diskBlock == 0 {
			d.fences = append(d.fences, s.key)
		}
		binary.LittleEndian.PutUint64(rec[0:8], s.key)
		binary.LittleEndian.PutUint64(rec[8:16], s.fp)
		w.Write(rec[:])
		d.n++
	}
	var prev slot
	have := false
	for s, err := range b.l.All() {
		if err != nil {
			f.Close()
			return nil, err
		}
		if have && s.key != prev.key {
			put(prev)
		}
		prev, have = s, true
	}
	if have {
		put(prev)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the disk index: %w", err)
	}
	return d, nil
}

// slotCodec stores a pair as 16 little-endian bytes.
type slotCodec struct{}

func (slotCodec) Append(b []byte, s *slot) []byte {
	b = binary.LittleEndian.AppendUint64(b, s.key)
	return binary.LittleEndian.AppendUint64(b, s.fp)
}

func (slotCodec) Decode(b []byte) (slot, error) {
	if len(b) != entryLen {
		return slot{}, errors.New("a pair of the wrong length")
	}
	return slot{binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16])}, nil
}
