package send

import (
	"errors"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// TestAddBlocksHostile: a receiver's block list is taken only for the
// batch awaiting its need list, for a file (or a range of one) of at
// least the bytes it hashed, once; any other is a protocol error.
func TestAddBlocksHostile(t *testing.T) {
	b := &model.Batch{ID: 5, Entries: []model.Entry{
		{Path: "f", Kind: model.KindFile, Size: 1 << 20},
		{Path: "d", Kind: model.KindDir},
		{Path: "r", Kind: model.KindFile, Size: 1 << 20, Off: 0, Len: 1 << 19},
	}}
	list := func(id uint64, i int, l int64) *wire.BlockList {
		return &wire.BlockList{ID: id, Index: i, BlockSize: wire.MinBlock, Len: l, Hashes: make([]wire.Sum, wire.BlockCount(l, wire.MinBlock))}
	}
	fl := &inflight{b: b}
	if err := addBlocks(fl, list(5, 0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := addBlocks(fl, list(5, 0, 1<<20)); !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("twice: %v, want a protocol error", err)
	}
	if err := addBlocks(fl, list(5, 2, 1<<19)); err != nil {
		t.Errorf("a range's: %v", err)
	}
	for name, bl := range map[string]*wire.BlockList{
		"other batch":  list(6, 0, 1<<20),
		"directory":    list(5, 1, 1<<20),
		"past a range": list(5, 2, 1<<19+1),
		"past entries": list(5, 3, 1<<20),
		"longer":       list(5, 0, 1<<20+1),
	} {
		if err := addBlocks(&inflight{b: b}, bl); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("%s: %v, want a protocol error", name, err)
		}
	}
	if err := addBlocks(nil, list(5, 0, 1)); !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("no batch awaiting: %v", err)
	}
}
