package spill_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/sharder"
)

func collect(t *testing.T, l *spill.List[sharder.Entry], n int) []sharder.Entry {
	t.Helper()
	var got []sharder.Entry
	err := l.Each(n, func(c []sharder.Entry) error {
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
	byPath := func(a, b *sharder.Entry) int { return cmp.Compare(a.Path, b.Path) }
	l := spill.New(dir, 100, byPath, sharder.EntryCodec{})
	defer l.Close()
	var want []sharder.Entry
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2345 {
		e := sharder.Entry{Path: fmt.Sprintf("d%03d", r.IntN(500)), Kind: sharder.KindDir, Size: int64(i)}
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
	slices.SortStableFunc(want, func(a, b sharder.Entry) int { return byPath(&a, &b) })
	got := collect(t, l, 64)
	if !slices.Equal(got, want) {
		t.Fatalf("merged order differs from a stable sort (%d entries, want %d)", len(got), len(want))
	}
	// Again, and after more were added: the same list, in order.
	l.Add(sharder.Entry{Path: "d000"})
	want = slices.Insert(want, slices.IndexFunc(want, func(e sharder.Entry) bool { return e.Path > "d000" }), sharder.Entry{Path: "d000"})
	if got := collect(t, l, 1000); !slices.Equal(got, want) {
		t.Fatal("a second read after an Add differs")
	}
}

// Without an order the list comes back as it was added, across runs.
func TestInsertionOrder(t *testing.T) {
	l := spill.New[sharder.Entry](t.TempDir(), 7, nil, sharder.EntryCodec{})
	defer l.Close()
	var want []sharder.Entry
	for i := range 100 {
		e := sharder.Entry{Path: fmt.Sprintf("s%d", 100-i), Kind: sharder.KindSymlink, Link: "../t"}
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
	l := spill.New[sharder.Entry](t.TempDir()+"/missing", 2, nil, sharder.EntryCodec{})
	l.Add(sharder.Entry{Path: "a"})
	if err := l.Add(sharder.Entry{Path: "b"}); err == nil {
		t.Fatal("no error from a spill into a missing directory")
	}
	if l.Err() == nil || l.Each(10, func([]sharder.Entry) error { return nil }) == nil {
		t.Fatal("the error did not stick")
	}
}
