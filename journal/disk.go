package journal

import (
	"encoding/binary"
	"errors"

	"github.com/bulkmove/bulkmove/internal/hashidx"
	"github.com/bulkmove/bulkmove/internal/spill"
)

// MemEntries is how many recorded files Open keeps in its in-memory index
// (16.5 bytes each: 66 MiB for the default 4 Mi). A journal of more files
// keeps that many in memory, chosen by path hash (those below a split
// point), and the rest in a disk index (see below). Set it before Open.
var MemEntries int64 = 4 << 20

// spillMem is how many pairs the sort of the disk index holds in memory
// while Open builds it (16 bytes each).
const spillMem = 1 << 18

// The disk index is the part of the index beyond what memory holds: the
// (path hash, fingerprint) pairs whose hash is at or above the split point,
// sorted by hash, one per hash (the last recorded), in a hashidx.Table (an
// unlinked temporary file beside the journal, 16 bytes a pair; in memory
// only the first hash of each 4 KiB block: 0.3 MiB for 10 million). A
// lookup reads the one block that can hold its hash; a failure to read it
// makes Done say no, and the file is then sent again.
//
// Why not a merge join in walk order: the walk is not in any order a
// journal could be sorted by (directories are read in parallel, names in
// readdir order), and the journal holds path hashes, not paths, which
// carry no order at all.

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
func (b *diskBuilder) index() (*hashidx.Table, error) {
	defer b.l.Close()
	if err := b.l.Err(); err != nil {
		return nil, err
	}
	w, err := hashidx.NewWriter(b.dir, true)
	if err != nil {
		return nil, err
	}
	var prev slot
	have := false
	for s, err := range b.l.All() {
		if err == nil && have && s.key != prev.key {
			err = w.Add(prev.key, prev.fp)
		}
		if err != nil {
			w.Abort()
			return nil, err
		}
		prev, have = s, true
	}
	if have {
		if err := w.Add(prev.key, prev.fp); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Finish()
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
