package hashidx

import (
	"fmt"
	"slices"
	"sync"
)

// DefaultSetMem is how many hashes a Set keeps in memory when NewSet is
// given 0: 1 Mi (about 16 MiB of map).
const DefaultSetMem = 1 << 20

// Set is a set of 64-bit hashes that may outgrow memory: up to mem of
// them in a map, and the rest in Tables on disk, in an unlinked temporary
// file each. When the map fills, its hashes are written out sorted as a
// new table, and tables are merged as they come (a table is merged into
// the one before it while that one is at most twice its size), so there
// are at most about log2(n/mem) of them: Has reads one 4 KiB block of
// each, at most, for a hash that is not in memory.
//
// Its answers are exact: Has says yes for a hash added, whenever added,
// and no for any other. Add and Has may be called from several goroutines
// at once, and in any order.
type Set struct {
	dir string
	mem int

	mu     sync.RWMutex
	m      map[uint64]struct{}
	tables []*Table // oldest (largest) first
	keys   []uint64 // the map's hashes being sorted (see spill)
	err    error    // the first failure to write a table; then the map only grows
}

// NewSet returns an empty set that keeps up to mem hashes in memory (0:
// DefaultSetMem) and writes the rest to unlinked temporary files in dir
// ("": os.TempDir()).
func NewSet(dir string, mem int) *Set {
	if mem <= 0 {
		mem = DefaultSetMem
	}
	return &Set{dir: dir, mem: mem, m: map[uint64]struct{}{}}
}

// Add puts h in the set. A failure to write the map out to disk (a full
// disk) keeps the hashes in memory, which then grows: nothing is lost.
// That failure is returned (once) and kept for Err.
func (s *Set) Add(h uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[h] = struct{}{}
	if len(s.m) < s.mem || s.err != nil {
		return nil
	}
	if err := s.spill(); err != nil {
		s.err = err
		return err
	}
	return nil
}

// spill writes the map out as a table and merges the tables that have
// become alike in size; s.mu is held.
func (s *Set) spill() error {
	keys := s.keys[:0]
	for h := range s.m {
		keys = append(keys, h)
	}
	slices.Sort(keys)
	s.keys = keys // kept for the next time: mem hashes, as the map
	w, err := NewWriter(s.dir, false)
	if err != nil {
		return err
	}
	for _, h := range keys {
		if err := w.Add(h, 0); err != nil {
			w.Abort()
			return err
		}
	}
	t, err := w.Finish()
	if err != nil {
		return err
	}
	s.tables = append(s.tables, t)
	clear(s.m)
	for n := len(s.tables); n >= 2 && s.tables[n-2].Len() <= 2*s.tables[n-1].Len(); n = len(s.tables) {
		m, err := merge(s.dir, s.tables[n-2], s.tables[n-1])
		if err != nil {
			// Both tables stay as they are: nothing is lost.
			return err
		}
		s.tables[n-2].Close()
		s.tables[n-1].Close()
		s.tables[n-2] = m
		s.tables = s.tables[:n-1]
	}
	return nil
}

// merge writes the union of a and b as a new table.
func merge(dir string, a, b *Table) (*Table, error) {
	w, err := NewWriter(dir, false)
	if err != nil {
		return nil, err
	}
	ca, cb := a.cursor(), b.cursor()
	x, okA, errA := ca.next()
	y, okB, errB := cb.next()
	for err == nil && (okA || okB) {
		var h uint64
		switch {
		case errA != nil || errB != nil:
			err = cmpErr(errA, errB)
			continue
		case okA && (!okB || x.Key < y.Key):
			h = x.Key
			x, okA, errA = ca.next()
		case !okA || y.Key < x.Key:
			h = y.Key
			y, okB, errB = cb.next()
		default: // the same hash in both
			h = x.Key
			x, okA, errA = ca.next()
			y, okB, errB = cb.next()
		}
		err = w.Add(h, 0)
	}
	if err == nil {
		err = cmpErr(errA, errB)
	}
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("merging hash tables: %w", err)
	}
	return w.Finish()
}

// cmpErr is the first of two errors that is not nil.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Has reports whether h was added. An error is a failure to read a table
// from disk: the answer is then unknown, and false.
func (s *Set) Has(h uint64) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.m[h]; ok {
		return true, nil
	}
	for i := len(s.tables) - 1; i >= 0; i-- {
		if _, ok, err := s.tables[i].Lookup(h); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// InMem is how many hashes the map holds now.
func (s *Set) InMem() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// Tables is how many tables are on disk now.
func (s *Set) Tables() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tables)
}

// Err is the first failure to write hashes to disk (see Add).
func (s *Set) Err() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.err
}

// Close releases the tables and the map; the set is then empty.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for _, t := range s.tables {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
	}
	s.tables, s.keys = nil, nil
	s.m = map[uint64]struct{}{}
	return err
}
