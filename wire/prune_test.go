package wire

import (
	"errors"
	"reflect"
	"testing"
)

func TestPruneRoundTrip(t *testing.T) {
	req := &PruneRequest{ID: 7, DryRun: true, DeleteExcluded: true, More: true, CountOnly: true, Limit: 300, Rules: []string{"- *.o", "P /keep/"},
		Dirs: []PruneDir{{Dir: ".", Names: []string{"a", "b\xff"}}, {Dir: "a/b", Names: []string{}}}}
	got, err := DecodePrune(EncodePrune(req))
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, req)
	}
	res := &PruneResult{ID: 7, More: true, Removed: []PrunedEntry{{Path: "x", IsDir: true, Kind: KindDir}, {Path: "y"}, {Path: "l", Kind: KindSymlink}}, Errors: []string{"delete z: busy"},
		Examined: 2000, Count: 1500, Held: 3}
	gotr, err := DecodePruned(EncodePruned(res))
	if err != nil || !reflect.DeepEqual(gotr, res) {
		t.Fatalf("round trip: %+v, %v; want %+v", gotr, err, res)
	}
	// Every truncation is a protocol error, never a panic or a short read.
	decoders := map[string]func([]byte) error{
		"request": func(b []byte) error { _, err := DecodePrune(b); return err },
		"result":  func(b []byte) error { _, err := DecodePruned(b); return err },
	}
	blobs := map[string][]byte{"request": EncodePrune(req), "result": EncodePruned(res)}
	for name, b := range blobs {
		for n := range len(b) {
			if err := decoders[name](b[:n]); !errors.Is(err, ErrProtocol) {
				t.Errorf("%s truncated at %d of %d bytes: %v, want a protocol error", name, n, len(b), err)
			}
		}
	}
}

// An Exact request carries each name's kind; the flags that do not go
// together, and a kind that does not exist, are refused.
func TestPruneExactRoundTrip(t *testing.T) {
	req := &PruneRequest{ID: 9, Exact: true, Limit: 5, Rules: []string{"P keep"},
		Dirs: []PruneDir{{Dir: "a", Names: []string{"f", "d", "l"}, Kinds: []EntryKind{KindFile, KindDir, KindSymlink}}}}
	got, err := DecodePrune(EncodePrune(req))
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, req)
	}
	cands := &PruneRequest{ID: 10, CountOnly: true, Candidates: true, Dirs: []PruneDir{{Dir: ".", Names: []string{"a"}}}}
	if got, err := DecodePrune(EncodePrune(cands)); err != nil || !reflect.DeepEqual(got, cands) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, cands)
	}
	for _, bad := range []*PruneRequest{
		{ID: 1, Exact: true, More: true, Dirs: []PruneDir{{Dir: ".", Names: []string{"a"}, Kinds: []EntryKind{KindFile}}}},
		{ID: 2, Candidates: true, Dirs: []PruneDir{{Dir: ".", Names: []string{"a"}}}},
		{ID: 3, Exact: true, Dirs: []PruneDir{{Dir: ".", Names: []string{"a"}, Kinds: []EntryKind{KindOther + 1}}}},
	} {
		if _, err := DecodePrune(EncodePrune(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%+v: %v, want a protocol error", bad, err)
		}
	}
}

// A count larger than the frame can hold is refused before allocating.
func TestPruneHugeCount(t *testing.T) {
	e := enc{}
	e.uvarint(1)
	e.uvarint(0)
	e.uvarint(0)       // rules
	e.uvarint(1)       // dirs
	e.bytes(".")       // dir
	e.uvarint(1 << 40) // names
	if _, err := DecodePrune(e.b); !errors.Is(err, ErrProtocol) {
		t.Errorf("huge name count: %v, want a protocol error", err)
	}
}

func FuzzDecodePrune(f *testing.F) {
	f.Add(EncodePrune(&PruneRequest{ID: 1, Rules: []string{"- *.o"}, Dirs: []PruneDir{{Dir: ".", Names: []string{"a"}}}}))
	f.Add(EncodePruned(&PruneResult{ID: 2, Removed: []PrunedEntry{{Path: "x", IsDir: true}}, Errors: []string{"e"}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		if r, err := DecodePrune(p); err == nil {
			if got, err := DecodePrune(EncodePrune(r)); err != nil || !reflect.DeepEqual(got, r) {
				t.Fatalf("re-encoding a decoded request: %v", err)
			}
		} else if !errors.Is(err, ErrProtocol) {
			t.Fatalf("DecodePrune: %v, not a protocol error", err)
		}
		if _, err := DecodePruned(p); err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("DecodePruned: %v, not a protocol error", err)
		}
	})
}
