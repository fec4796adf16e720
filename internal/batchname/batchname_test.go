package batchname

import "testing"

func TestName(t *testing.T) {
	for id, want := range map[uint64]string{
		1: "#1", 17: "#17", SplitBase - 1: "#2305843009213693951", SplitBase: "#2305843009213693952",
		SplitBase + 1: "#s1", 2305843009213693984: "#s32", FinalBase: "#s2305843009213693952",
		FinalBase + 1: "#f1", FinalBase + 40: "#f40", Retry - 1: "#f4611686018427387902", Retry: "#retry",
	} {
		if got := Name(id); got != want {
			t.Errorf("Name(%d) = %q, want %q", id, got, want)
		}
	}
}
