package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// The fuzz targets check that the decoders never panic on any input and
// that whatever they accept survives a round trip: Encode(Decode(x))
// decodes to the same value, and encoding is canonical from there on.

func manifestSeeds() []*wire.BatchManifest {
	return []*wire.BatchManifest{
		{},
		{ID: 1, Entries: []model.Entry{{Path: "a", Kind: model.KindFile, Mode: 0o644, Size: 3, MTime: 1_600_000_000_123456789, UID: 1000, GID: 1000, Nlink: 1}}},
		{ID: 1 << 40, Flags: wire.FlagFinal, Entries: []model.Entry{
			{Path: ".", Kind: model.KindDir, Mode: 0o755 | 0o1000, MTime: -1},
			{Path: "d/l", Kind: model.KindSymlink, Mode: 0o777, Link: "/etc"},
			{Path: "h", Kind: model.KindHardlink, Mode: 0o4755, Link: "a"},
			{Path: "s", Kind: model.KindFile, Mode: 0o644 | 1<<23, Size: 10 << 30},
		}},
		// Entries of the minimal encoded size (empty names: the receiver's
		// concern, not the codec's).
		{ID: 2, Entries: make([]model.Entry, 40)},
		// Content hashes (checksum mode), on some files only.
		{ID: 3, Entries: []model.Entry{
			{Path: "a", Kind: model.KindFile, Mode: 0o644, Size: 3, MTime: 1},
			{Path: "b", Kind: model.KindFile, Mode: 0o644, Size: 9},
			{Path: "c", Kind: model.KindFile, Mode: 0o600},
		}, Sums: []wire.Sum{wire.HashBytes([]byte("abc")), {}, wire.EmptySum}},
		// The sender's names of the owners (--usermap by name).
		{ID: 4, Entries: []model.Entry{{Path: "a", Kind: model.KindFile, Mode: 0o644, UID: 1001, GID: 50}},
			Names: []wire.IDName{{ID: 1001, Name: "alice"}, {Group: true, ID: 50, Name: "staff"}}},
	}
}

func FuzzDecodeManifest(f *testing.F) {
	for _, m := range manifestSeeds() {
		f.Add(wire.EncodeManifest(m))
	}
	f.Add(nonCanonicalManifest(20))
	bad := wire.EncodeManifest(&wire.BatchManifest{Entries: []model.Entry{{Path: "x", Kind: 9}}})
	f.Add(bad)
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(wire.EncodeManifest(&wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{
		{Path: "d", Kind: model.KindDir, Mode: 0o755}, {Path: "l", Kind: model.KindSymlink, Link: "d"}},
		Xattrs: [][]wire.Xattr{{{Name: "user.a", Value: "1"}, {Name: wire.ACLDefault, Value: "\x02\x00"}}, {{Name: "trusted.t", Value: ""}}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		m, err := wire.DecodeManifest(p)
		if err != nil {
			if m != nil {
				t.Fatalf("error %v with a manifest", err)
			}
			return
		}
		// What the receiver counts while it decodes is the manifest's
		// cost, to the byte: within it the manifest decodes, a byte less
		// and it is refused as over the limit.
		cost := wire.ManifestCost(m)
		if _, err := wire.DecodeManifestMax(p, cost); err != nil {
			t.Fatalf("manifest of cost %d refused within it: %v", cost, err)
		}
		if _, err := wire.DecodeManifestMax(p, cost-1); cost > 0 && !errors.Is(err, wire.ErrLimit) {
			t.Fatalf("manifest of cost %d decoded within %d: %v", cost, cost-1, err)
		}
		q := wire.EncodeManifest(m)
		m2, err := wire.DecodeManifest(q)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v\n%+v", err, m)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
		}
		if !bytes.Equal(wire.EncodeManifest(m2), q) {
			t.Fatalf("encoding is not canonical")
		}
	})
}

func FuzzDecodeAck(f *testing.F) {
	for _, a := range []*wire.BatchAck{
		{},
		{ID: 7, Files: 3, Bytes: 1 << 40, Skipped: 2},
		{ID: 9, Errors: []wire.EntryError{{Index: 0, Code: wire.CodeNoSpace, Msg: "write a: no space left on device"}, {Index: 1 << 20, Code: 255, Msg: ""}}},
		{ID: 11, Items: []wire.Item{{Index: 0, Flags: wire.ItemNew | wire.ItemSent}, {Index: 5, Flags: wire.ItemPerms}}},
	} {
		f.Add(wire.EncodeAck(a))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		a, err := wire.DecodeAck(p)
		if err != nil {
			return
		}
		q := wire.EncodeAck(a)
		a2, err := wire.DecodeAck(q)
		if err != nil {
			t.Fatalf("re-encoded ack does not decode: %v\n%+v", err, a)
		}
		if !reflect.DeepEqual(a, a2) {
			t.Fatalf("round trip changed the ack:\n%+v\n%+v", a, a2)
		}
		if !bytes.Equal(wire.EncodeAck(a2), q) {
			t.Fatalf("encoding is not canonical")
		}
	})
}

func FuzzDecodeNeed(f *testing.F) {
	f.Add(wire.EncodeNeed(0, nil))
	f.Add(wire.EncodeNeed(3, []bool{true, false, true}))
	f.Add(wire.EncodeNeed(1<<63, []bool{true, true, true, true, true, true, true, true, false}))
	f.Fuzz(func(t *testing.T, p []byte) {
		id, need, err := wire.DecodeNeed(p)
		if err != nil {
			return
		}
		q := wire.EncodeNeed(id, need)
		id2, need2, err := wire.DecodeNeed(q)
		if err != nil {
			t.Fatalf("re-encoded need does not decode: %v", err)
		}
		if id != id2 || !slices.Equal(need, need2) {
			t.Fatalf("round trip changed the need list: %d %v, %d %v", id, need, id2, need2)
		}
		if !bytes.Equal(wire.EncodeNeed(id2, need2), q) {
			t.Fatalf("encoding is not canonical")
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	f.Add(wire.EncodeCommit(0, nil))
	f.Add(wire.EncodeCommit(5, []wire.Discard{{Index: 0, Reason: "changed while being read"}, {Index: 1 << 20}}))
	f.Add(wire.EncodeCommit(6, nil, wire.IndexedSum{Index: 3, Sum: wire.HashBytes([]byte("x"))}))
	f.Fuzz(func(t *testing.T, p []byte) {
		id, ds, sums, err := wire.DecodeCommitSums(p)
		if err != nil {
			return
		}
		q := wire.EncodeCommit(id, ds, sums...)
		id2, ds2, sums2, err := wire.DecodeCommitSums(q)
		if err != nil {
			t.Fatalf("re-encoded commit does not decode: %v", err)
		}
		if id != id2 || !reflect.DeepEqual(ds, ds2) || !reflect.DeepEqual(sums, sums2) {
			t.Fatalf("round trip changed the commit: %d %+v %v, %d %+v %v", id, ds, sums, id2, ds2, sums2)
		}
		if !bytes.Equal(wire.EncodeCommit(id2, ds2, sums2...), q) {
			t.Fatalf("encoding is not canonical")
		}
	})
}

// nonCanonicalManifest is n entries with empty names, each padded to ten
// bytes by a two-byte encoding of its zero mode.
func nonCanonicalManifest(n int) []byte {
	p := []byte{0, 0, byte(n)} // id, flags, count (n < 128)
	for range n {
		p = append(p, byte(model.KindFile), 0, 0x80, 0x00, 0, 0, 0, 0, 0, 0)
	}
	return p
}

// An entry can encode in nine bytes: the decoder's bound on the entry
// count must not refuse a manifest the encoder wrote.
func TestManifestMinimalEntries(t *testing.T) {
	for _, n := range []int{1, 10, 11, 20, 100} {
		m := &wire.BatchManifest{ID: 1, Entries: make([]model.Entry, n)}
		for i := range m.Entries {
			m.Entries[i].Kind = model.KindFile
		}
		p := wire.EncodeManifest(m)
		m2, err := wire.DecodeManifest(p)
		if err != nil {
			t.Fatalf("%d entries in %d bytes: %v", n, len(p), err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("%d entries: round trip changed the manifest", n)
		}
		// And from a padded encoding, as FuzzDecodeManifest does.
		if n < 128 {
			m3, err := wire.DecodeManifest(nonCanonicalManifest(n))
			if err != nil {
				t.Fatalf("padded %d entries: %v", n, err)
			}
			if _, err := wire.DecodeManifest(wire.EncodeManifest(m3)); err != nil {
				t.Fatalf("padded %d entries, re-encoded: %v", n, err)
			}
		}
	}
	// Still refused: more entries than the payload can hold.
	p := wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: make([]model.Entry, 20)})
	p[2] = 100
	if _, err := wire.DecodeManifest(p); err == nil {
		t.Fatal("100 entries declared in the bytes of 20 decoded")
	}
}

// TestAckItems: the items of an ack arrive as sent; a count past the
// payload, an index past the entries a batch may have, and flags no
// receiver sends are refused.
func TestAckItems(t *testing.T) {
	a := &wire.BatchAck{ID: 3, Files: 1, Items: []wire.Item{{Index: 2, Flags: wire.ItemNew | wire.ItemSent}, {Index: 9, Flags: wire.ItemTime | wire.ItemPerms}}}
	got, err := wire.DecodeAck(wire.EncodeAck(a))
	if err != nil || len(got.Items) != 2 || got.Items[0] != a.Items[0] || got.Items[1] != a.Items[1] {
		t.Fatalf("DecodeAck = %+v, %v; want the items %+v", got, err, a.Items)
	}
	for _, bad := range []wire.Item{{Index: wire.MaxEntries + 1, Flags: wire.ItemNew}, {Index: 1, Flags: 0}, {Index: 1, Flags: 1 << 15}} {
		p := wire.EncodeAck(&wire.BatchAck{ID: 3, Items: []wire.Item{bad}})
		if _, err := wire.DecodeAck(p); err == nil {
			t.Errorf("an ack with item %+v decoded", bad)
		}
	}
}

// Names a receiver cannot take are refused: a colon, a newline, an empty
// name, more names than the entries have owners.
func TestManifestNamesRefused(t *testing.T) {
	e := []model.Entry{{Path: "a", Kind: model.KindFile, Mode: 0o644, UID: 1}}
	for _, names := range [][]wire.IDName{
		{{ID: 1, Name: "a:b"}}, {{ID: 1, Name: "a\nb"}}, {{ID: 1, Name: ""}},
		{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {Group: true, ID: 3, Name: "c"}},
	} {
		if _, err := wire.DecodeManifest(wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: e, Names: names})); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("names %+v: %v, want a protocol error", names, err)
		}
	}
}
