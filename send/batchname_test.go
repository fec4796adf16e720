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
	p.nextID, p.nextSplit = batchname.FinalBase, batchname.SplitBase // as Run starts them
	a, b := p.split(&model.Batch{ID: 17, Entries: make([]model.Entry, 4)})
	if batchname.Name(a.ID) != "#17" || batchname.Name(b.ID) != "#s1" {
		t.Errorf("a split of #17: %s and %s", batchname.Name(a.ID), batchname.Name(b.ID))
	}
}
