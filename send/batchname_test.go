package send

import (
	"testing"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/model"
)

// TestBatchNameRanges: the ranges batchname reads ids by are the pool's.
func TestBatchNameRanges(t *testing.T) {
	if retryID != batchname.Retry {
		t.Errorf("retryID %d, batchname.Retry %d", uint64(retryID), uint64(batchname.Retry))
	}
	if !fromQueue(batchname.FinalBase-1) || fromQueue(batchname.FinalBase+1) || !fromQueue(batchname.SplitBase+1) {
		t.Error("fromQueue and batchname disagree on where the final batches start")
	}
	var p Pool
	p.nextID, p.nextSplit = batchname.FinalBase, batchname.SplitOther // as Run starts them
	a, b := p.split(&model.Batch{ID: 17, Entries: make([]model.Entry, 8)})
	if batchname.Name(a.ID) != "#17" || batchname.Name(b.ID) != "#17.2" {
		t.Errorf("a split of #17: %s and %s", batchname.Name(a.ID), batchname.Name(b.ID))
	}
	// Its parts split again are parts of #17 too, each id once.
	c, d := p.split(b)
	e, f := p.split(a)
	for i, want := range []string{"#17.2", "#17.3", "#17", "#17.4"} {
		if got := batchname.Name([]*model.Batch{c, d, e, f}[i].ID); got != want {
			t.Errorf("part %d of the second splits: %s, want %s", i, got, want)
		}
	}
	// A batch whose id leaves no room for a part's: #s1.
	if _, g := p.split(&model.Batch{ID: batchname.FinalBase + 3, Entries: make([]model.Entry, 4)}); batchname.Name(g.ID) != "#s1" {
		t.Errorf("a split of #f3: %s, want #s1", batchname.Name(g.ID))
	}
}
