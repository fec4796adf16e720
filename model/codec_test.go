package model

import (
	"io/fs"
	"testing"
)

// Every field survives the disk.
func TestEntryRoundTrip(t *testing.T) {
	e := Entry{Path: "a/b c/é", Kind: KindHardlink, Mode: 0o4755 | fs.ModeSetuid, Size: -1,
		MTime: -1234567890123, UID: 1<<32 - 1, GID: 7, Link: "x/y", Nlink: 3, Dev: 1<<64 - 1, Ino: 42, Rdev: Mkdev(1<<32-1, 3)}
	b := AppendEntry(nil, &e)
	got, err := EntryCodec{}.Decode(b)
	if err != nil || got != e {
		t.Fatalf("got %+v, %v; want %+v", got, err, e)
	}
	for i := range b {
		if _, err := (EntryCodec{}).Decode(b[:i]); err == nil {
			t.Fatalf("a cut encoding (%d of %d bytes) decoded", i, len(b))
		}
	}
}
