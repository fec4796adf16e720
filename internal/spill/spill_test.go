package spill_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/model"
)

func collect(t *testing.T, l *spill.List[model.Entry], n int) []model.Entry {
	t.Helper()
	var got []model.Entry
	err := l.Each(n, func(c []model.Entry) error {
		if len(c) == 0 || len(c) > n {
			t.Fatalf("a chunk of %d entries (at most %d)", len(c), n)
		}
		got = append(got, c...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A sorted list of many runs comes back as one sort of everything would
// give, equal keys in the order they were added, and leaves no file in
// its directory.
func TestSortedSpill(t *testing.T) {
	dir := t.TempDir()
	byPath := func(a, b *model.Entry) int { return cmp.Compare(a.Path, b.Path) }
	l := spill.New(dir, 100, byPath, model.EntryCodec{})
	defer l.Close()
	var want []model.Entry
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2345 {
		e := model.Entry{Path: fmt.Sprintf("d%03d", r.IntN(500)), Kind: model.KindDir, Size: int64(i)}
		want = append(want, e)
		if err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if !l.Spilled() {
		t.Fatal("2345 entries with room for 100 in memory: nothing went to disk")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the spill file has a name in %s: %v", dir, ents)
	}
	slices.SortStableFunc(want, func(a, b model.Entry) int { return byPath(&a, &b) })
	got := collect(t, l, 64)
	if !slices.Equal(got, want) {
		t.Fatalf("merged order differs from a stable sort (%d entries, want %d)", len(got), len(want))
	}
	// Again, and after more were added: the same list, in order.
	l.Add(model.Entry{Path: "d000"})
	want = slices.Insert(want, slices.IndexFunc(want, func(e model.Entry) bool { return e.Path > "d000" }), model.Entry{Path: "d000"})
	if got := collect(t, l, 1000); !slices.Equal(got, want) {
		t.Fatal("a second read after an Add differs")
	}
}

// Without an order the list comes back as it was added, across runs.
func TestInsertionOrder(t *testing.T) {
	l := spill.New[model.Entry](t.TempDir(), 7, nil, model.EntryCodec{})
	defer l.Close()
	var want []model.Entry
	for i := range 100 {
		e := model.Entry{Path: fmt.Sprintf("s%d", 100-i), Kind: model.KindSymlink, Link: "../t"}
		want = append(want, e)
		l.Add(e)
	}
	if got := collect(t, l, 9); !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	if l.Len() != 100 {
		t.Errorf("Len %d, want 100", l.Len())
	}
}

// A directory that cannot take the spill file: Add says so, and so do Err
// and Each.
func TestSpillError(t *testing.T) {
	l := spill.New[model.Entry](t.TempDir()+"/missing", 2, nil, model.EntryCodec{})
	l.Add(model.Entry{Path: "a"})
	if err := l.Add(model.Entry{Path: "b"}); err == nil {
		t.Fatal("no error from a spill into a missing directory")
	}
	if l.Err() == nil || l.Each(10, func([]model.Entry) error { return nil }) == nil {
		t.Fatal("the error did not stick")
	}
}

// TestStack: random pushes and pops on a stack with room for a few items
// in memory give what a plain slice gives, with at most mem in memory.
func TestStack(t *testing.T) {
	const mem = 10
	dir := t.TempDir()
	s := spill.NewStack[string](dir, mem, spill.StringCodec{})
	defer s.Close()
	var ref []string
	rng := rand.New(rand.NewPCG(3, 4))
	spilled := false
	for i := range 50000 {
		if rng.IntN(5) < 3 || len(ref) == 0 && rng.IntN(2) == 0 {
			v := strconv.Itoa(i) + strings.Repeat("x", rng.IntN(20))
			s.Push(v)
			ref = append(ref, v)
		} else {
			v, ok, err := s.Pop()
			if err != nil {
				t.Fatal(err)
			}
			if ok != (len(ref) > 0) {
				t.Fatalf("pop %d: ok %v with %d on the stack", i, ok, len(ref))
			}
			if ok {
				if want := ref[len(ref)-1]; v != want {
					t.Fatalf("pop %d: %q, want %q", i, v, want)
				}
				ref = ref[:len(ref)-1]
			}
		}
		if s.InMem() > mem {
			t.Fatalf("%d items in memory, limit %d", s.InMem(), mem)
		}
		if s.Len() != int64(len(ref)) {
			t.Fatalf("Len %d, want %d", s.Len(), len(ref))
		}
		spilled = spilled || int64(s.InMem()) < s.Len()
	}
	for len(ref) > 0 {
		v, ok, err := s.Pop()
		if err != nil || !ok || v != ref[len(ref)-1] {
			t.Fatalf("draining: %q %v %v, want %q", v, ok, err, ref[len(ref)-1])
		}
		ref = ref[:len(ref)-1]
	}
	if _, ok, _ := s.Pop(); ok {
		t.Fatal("pop of an empty stack")
	}
	if !spilled {
		t.Fatal("nothing went to disk")
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("files left: %v", ents)
	}
}
