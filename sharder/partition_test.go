package sharder

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bulkmove/bulkmove/model"
)

// feed runs a partitioner over files of the given sizes and returns the batches.
func feed(t *testing.T, maxBytes int64, maxFiles int, fileCost int64, sizes []int64) []*model.Batch {
	t.Helper()
	out := make(chan *model.Batch, len(sizes)+1)
	p := newPartitioner(maxBytes, maxFiles, fileCost, out)
	ctx := context.Background()
	for i, s := range sizes {
		if err := p.add(ctx, model.Entry{Path: fmt.Sprint(i), Kind: model.KindFile, Size: s}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(out)
	var bs []*model.Batch
	for b := range out {
		bs = append(bs, b)
	}
	if p.batches != int64(len(bs)) {
		t.Errorf("batches counted %d, sent %d", p.batches, len(bs))
	}
	// IDs 1, 2, 3...; order kept; Bytes right; nothing empty.
	next := 0
	for i, b := range bs {
		if b.ID != uint64(i+1) {
			t.Errorf("batch %d has ID %d", i, b.ID)
		}
		if len(b.Entries) == 0 {
			t.Errorf("batch %d is empty", b.ID)
		}
		var sum int64
		for _, e := range b.Entries {
			if e.Path != fmt.Sprint(next) {
				t.Errorf("batch %d: entry %q, want %d", b.ID, e.Path, next)
			}
			next++
			sum += e.Size
		}
		if sum != b.Bytes {
			t.Errorf("batch %d: Bytes %d, sum %d", b.ID, b.Bytes, sum)
		}
	}
	if next != len(sizes) {
		t.Errorf("%d entries out, %d in", next, len(sizes))
	}
	return bs
}

func counts(bs []*model.Batch) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b.Entries))
	}
	return n
}

func TestPartitionFileLimit(t *testing.T) {
	sizes := make([]int64, 1050)
	bs := feed(t, 1<<40, 100, 16<<10, sizes)
	if len(bs) != 11 {
		t.Fatalf("%d batches, want 11: %v", len(bs), counts(bs))
	}
	for _, b := range bs[:10] {
		if len(b.Entries) != 100 {
			t.Errorf("batch %d holds %d files", b.ID, len(b.Entries))
		}
	}
	if n := len(bs[10].Entries); n != 50 {
		t.Errorf("last batch holds %d files, want 50", n)
	}
}

func TestPartitionByteLimit(t *testing.T) {
	// Cost per file 1000+24 = 1024; 10240 fits exactly 10.
	sizes := make([]int64, 35)
	for i := range sizes {
		sizes[i] = 1000
	}
	bs := feed(t, 10240, 1000, 24, sizes)
	want := []int{10, 10, 10, 5}
	if fmt.Sprint(counts(bs)) != fmt.Sprint(want) {
		t.Errorf("batch sizes %v, want %v", counts(bs), want)
	}
	// One more byte per file: 9 fit (9*1025=9225; 10*1025 > 10240).
	for i := range sizes {
		sizes[i] = 1001
	}
	bs = feed(t, 10240, 1000, 24, sizes)
	want = []int{9, 9, 9, 8}
	if fmt.Sprint(counts(bs)) != fmt.Sprint(want) {
		t.Errorf("batch sizes %v, want %v", counts(bs), want)
	}
	for _, b := range bs {
		if cost := b.Bytes + 24*int64(len(b.Entries)); cost > 10240 {
			t.Errorf("batch %d costs %d > 10240", b.ID, cost)
		}
	}
}

func TestPartitionLargeFileAlone(t *testing.T) {
	// small, small, huge, small, huge, huge, small
	sizes := []int64{10, 10, 5000, 10, 1 << 20, 4000, 10}
	bs := feed(t, 1000, 100, 1, sizes)
	want := []int{2, 1, 1, 1, 1, 1}
	if fmt.Sprint(counts(bs)) != fmt.Sprint(want) {
		t.Fatalf("batch sizes %v, want %v", counts(bs), want)
	}
	for _, i := range []int{1, 3, 4} {
		if bs[i].Bytes < 1000 {
			t.Errorf("batch %d: %d bytes, want a large file alone", bs[i].ID, bs[i].Bytes)
		}
	}
}

func TestPartitionExactFit(t *testing.T) {
	// A file whose cost is exactly the limit closes its batch at once.
	bs := feed(t, 100, 10, 0, []int64{100, 50, 50, 1})
	want := []int{1, 2, 1}
	if fmt.Sprint(counts(bs)) != fmt.Sprint(want) {
		t.Errorf("batch sizes %v, want %v", counts(bs), want)
	}
}

func TestPartitionEmpty(t *testing.T) {
	if bs := feed(t, 100, 10, 0, nil); len(bs) != 0 {
		t.Errorf("%d batches from nothing", len(bs))
	}
}

func TestPartitionCancelledSend(t *testing.T) {
	out := make(chan *model.Batch) // nobody reads
	p := newPartitioner(1<<20, 2, 0, out)
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.add(ctx, model.Entry{Path: "a", Size: 1}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := p.add(ctx, model.Entry{Path: "b", Size: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("add on a full, cancelled out: %v", err)
	}
}
