package batchname

import "testing"

func TestName(t *testing.T) {
	for id, want := range map[uint64]string{
		1: "#1", 17: "#17", SplitBase - 1: "#2305843009213693951", SplitBase: "#2305843009213693952",
		SplitBase + 17<<partBits + 2: "#17.2", SplitBase + 17<<partBits + 3: "#17.3", SplitBase + (1<<40-1)<<partBits + 1<<partBits - 1: "#1099511627775.1048575",
		SplitOther + 1: "#s1", SplitOther + 32: "#s32", FinalBase: "#s1152921504606846976",
		FinalBase + 1: "#f1", FinalBase + 40: "#f40", Retry - 1: "#f4611686018427387902", Retry: "#retry",
	} {
		if got := Name(id); got != want {
			t.Errorf("Name(%d) = %q, want %q", id, got, want)
		}
	}
}

func TestPart(t *testing.T) {
	for _, c := range []struct {
		root, n uint64
		ok      bool
	}{{17, 2, true}, {17, 1<<partBits - 1, true}, {1<<40 - 1, 2, true}, {0, 2, false}, {17, 1, false}, {17, 1 << partBits, false}, {1 << 40, 2, false}} {
		id, ok := Part(c.root, c.n)
		if ok != c.ok {
			t.Errorf("Part(%d, %d): ok %v, want %v", c.root, c.n, ok, c.ok)
			continue
		}
		if ok && (Root(id) != c.root || id >= SplitOther || id <= SplitBase) {
			t.Errorf("Part(%d, %d) = %d: root %d", c.root, c.n, id, Root(id))
		}
	}
	if Root(17) != 17 || Root(SplitOther+1) != 0 || Root(FinalBase+1) != 0 {
		t.Error("Root of a walk's, another split, a final batch")
	}
}
