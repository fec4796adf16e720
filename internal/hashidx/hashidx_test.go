package hashidx

import (
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
)

// TestTable: every hash written is found with its value, none other is,
// and All gives them back in order.
func TestTable(t *testing.T) {
	for _, values := range []bool{false, true} {
		for _, n := range []int{0, 1, 511, 512, 513, 5000} {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = rng.Uint64()
			}
			slices.Sort(keys)
			keys = slices.Compact(keys)
			w, err := NewWriter(t.TempDir(), values)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if err := w.Add(k, ^k); err != nil {
					t.Fatal(err)
				}
			}
			tb, err := w.Finish()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				v, ok, err := tb.Lookup(k)
				if err != nil || !ok {
					t.Fatalf("n=%d: %x not found (%v)", n, k, err)
				}
				if values && v != ^k || !values && v != 0 {
					t.Fatalf("n=%d: %x has value %x", n, k, v)
				}
				if _, ok, _ := tb.Lookup(k + 1); ok && !slices.Contains(keys, k+1) {
					t.Fatalf("n=%d: %x found, never added", n, k+1)
				}
			}
			if _, ok, _ := tb.Lookup(0); ok && (n == 0 || keys[0] != 0) {
				t.Fatal("0 found")
			}
			var got []uint64
			for p, err := range tb.All() {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Key)
			}
			if len(got) != len(keys) || (len(keys) > 0 && !slices.Equal(got, keys)) {
				t.Fatalf("n=%d: All gave %d hashes, want %d", n, len(got), len(keys))
			}
			tb.Close()
		}
	}
}

func TestWriterOrder(t *testing.T) {
	w, err := NewWriter(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Add(5, 0)
	if err := w.Add(5, 0); err == nil {
		t.Fatal("a hash added twice: no error")
	}
}

// TestSetExact: with a small memory limit, a set of many hashes added at
// random times between lookups answers exactly as a map does, keeps at
// most mem of them in memory and leaves no file behind.
func TestSetExact(t *testing.T) {
	dir := t.TempDir()
	const mem = 100
	s := NewSet(dir, mem)
	defer s.Close()
	ref := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	var all []uint64
	maxTables := 0
	for i := range 20000 {
		var h uint64
		if len(all) > 0 && rng.IntN(4) == 0 {
			h = all[rng.IntN(len(all))] // again: on disk or in memory
		} else {
			h = rng.Uint64()
			all = append(all, h)
		}
		if err := s.Add(h); err != nil {
			t.Fatal(err)
		}
		ref[h] = true
		if n := s.InMem(); n >= mem {
			t.Fatalf("%d hashes in memory, limit %d", n, mem)
		}
		maxTables = max(maxTables, s.Tables())
		if i%7 == 0 {
			for range 5 {
				q := rng.Uint64()
				if rng.IntN(2) == 0 {
					q = all[rng.IntN(len(all))]
				}
				got, err := s.Has(q)
				if err != nil {
					t.Fatal(err)
				}
				if got != ref[q] {
					t.Fatalf("after %d adds: Has(%x) = %v, want %v", i+1, q, got, ref[q])
				}
			}
		}
	}
	for h := range ref {
		if ok, err := s.Has(h); !ok || err != nil {
			t.Fatalf("Has(%x) = %v, %v; it was added", h, ok, err)
		}
	}
	t.Logf("%d hashes, at most %d tables", len(ref), maxTables)
	if maxTables > 12 {
		t.Errorf("%d tables at once for %d hashes of %d in memory: not merged", maxTables, len(ref), mem)
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("files left in the spill directory: %v", ents)
	}
}

// TestSetConcurrent: adds and lookups from several goroutines (for -race).
func TestSetConcurrent(t *testing.T) {
	s := NewSet(t.TempDir(), 64)
	defer s.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				h := uint64(g)<<32 | uint64(i)
				if err := s.Add(h); err != nil {
					t.Error(err)
					return
				}
				if ok, err := s.Has(h); !ok || err != nil {
					t.Errorf("Has(%x) right after Add: %v, %v", h, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for g := range 4 {
		for i := range 2000 {
			if ok, _ := s.Has(uint64(g)<<32 | uint64(i)); !ok {
				t.Fatalf("%d/%d lost", g, i)
			}
		}
	}
}
