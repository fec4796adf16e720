package extract_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// A FuzzReceive input is up to four batches, each:
//
//	selector byte   bit 0: which of two receivers on the root gets it
//	                bit 1: Abort instead of Commit
//	uvarint n, n bytes     the manifest payload (wire.DecodeManifest)
//	uvarint n, n bytes     the tar stream (cut short if the input is)
//
// A symlink target starting with "@outside" is rewritten to the absolute
// path of the sentinel directory, so that absolute escapes are reachable.
type fuzzBatch struct {
	sel      byte
	manifest []byte
	tar      []byte
}

const maxFuzzBatches = 4

func splitInput(in []byte) []fuzzBatch {
	var out []fuzzBatch
	for len(in) > 0 && len(out) < maxFuzzBatches {
		b := fuzzBatch{sel: in[0]}
		in = in[1:]
		n, k := binary.Uvarint(in)
		if k <= 0 || n > uint64(len(in)-k) {
			break
		}
		b.manifest, in = in[k:k+int(n)], in[k+int(n):]
		n, k = binary.Uvarint(in)
		if k > 0 {
			in = in[k:]
			n = min(n, uint64(len(in)))
			b.tar, in = in[:n], in[n:]
		} else {
			in = nil
		}
		out = append(out, b)
	}
	return out
}

func joinInput(bs []fuzzBatch) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b.sel)
		out = binary.AppendUvarint(out, uint64(len(b.manifest)))
		out = append(out, b.manifest...)
		out = binary.AppendUvarint(out, uint64(len(b.tar)))
		out = append(out, b.tar...)
	}
	return out
}

// receiveSeeds are the hostile cases of TestHostile, and a few good batches.
func receiveSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	s := &sandbox{outside: "@outside"}
	add := func(bs []batch) {
		var fb []fuzzBatch
		for i, b := range bs {
			id := uint64(i + 1)
			m := &wire.BatchManifest{ID: id, Entries: b.entries}
			if b.final {
				m.Flags = wire.FlagFinal
			}
			data := b.raw
			if data == nil {
				data = tarOf(tb, id, b.files...)
			}
			fb = append(fb, fuzzBatch{sel: byte(b.recv), manifest: wire.EncodeManifest(m), tar: data})
		}
		seeds = append(seeds, joinInput(fb))
	}
	for _, c := range hostileCases(tb) {
		add(c.batches(s))
	}
	f := fileE("f", 3)
	f.Nlink = 2
	add([]batch{
		{entries: []model.Entry{f, fileE("d/g", 2)}, files: []tarFile{tf("f", "abc"), tf("d/g", "gg")}},
		{final: true, entries: []model.Entry{hardE("h", "f"), symE("d/l", "../f"), dirE("d", 0o555), dirE(".", 0o755)}},
		{recv: 1, entries: []model.Entry{fileE("d/l", 1)}, files: []tarFile{tf("d/l", "x")}},
	})
	add([]batch{{entries: []model.Entry{fileE("a", 3)}, files: []tarFile{tf("a", "abc")}}})
	// Checksum mode (the second receiver): an equal file of another mtime
	// is fixed in place, and a symlink, or a path through one, is never
	// opened to be hashed.
	a := fileE("a", 3)
	old := a
	old.MTime -= 1e9
	abc := wire.HashBytes([]byte("abc"))
	seeds = append(seeds, joinInput([]fuzzBatch{
		{manifest: wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{old}}), tar: tarOf(tb, 1, tf("a", "abc"))},
		{manifest: wire.EncodeManifest(&wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: []model.Entry{symE("l", "@outside"), symE("m", "a")}}), tar: tarOf(tb, 2)},
		{sel: 1, manifest: wire.EncodeManifest(&wire.BatchManifest{ID: 3, Entries: []model.Entry{a, fileE("m", 3), fileE("l/x", 3)},
			Sums: []wire.Sum{abc, abc, abc}}), tar: tarOf(tb, 3)},
	}))
	return seeds
}

// FuzzReceive: whatever the manifests and tar streams, nothing is created
// outside the root and no temporary file remains after Commit or Abort.
func FuzzReceive(f *testing.F) {
	for _, seed := range receiveSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var ms []*wire.BatchManifest
		bs := splitInput(in)
		for _, b := range bs {
			m, err := wire.DecodeManifest(b.manifest)
			if err != nil {
				break
			}
			ms = append(ms, m)
		}
		if len(ms) == 0 {
			return
		}
		s := newSandbox(t)
		// The second receiver compares content hashes: it opens, reads
		// and fixes the metadata of existing files.
		recvs := [2]*extract.Receiver{s.open(t, extract.Options{}), s.open(t, extract.Options{Check: wire.CheckSum})}
		named := map[string]bool{} // names the manifests ask for may look temporary
		for i, m := range ms {
			for j := range m.Entries {
				e := &m.Entries[j]
				if rest, ok := strings.CutPrefix(e.Link, "@outside"); ok && e.Kind == model.KindSymlink {
					e.Link = s.outside + rest
				}
				named[e.Path] = true
			}
			r := recvs[bs[i].sel&1]
			txn, err := r.Receive(m, needFor(r, m), bytes.NewReader(bs[i].tar))
			if err != nil {
				if !errors.Is(err, extract.ErrStream) {
					t.Errorf("batch %d: Receive error is not ErrStream: %v", m.ID, err)
				}
				continue
			}
			if bs[i].sel&2 != 0 {
				txn.Abort()
				continue
			}
			ack := txn.Commit(m.ID, nil)
			for _, e := range ack.Errors {
				if e.Index < 0 || e.Index >= len(m.Entries) {
					t.Errorf("batch %d: entry error with index %d of %d", m.ID, e.Index, len(m.Entries))
				}
			}
		}
		for _, v := range s.violations(named) {
			t.Error(v)
		}
	})
}
