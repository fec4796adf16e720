package extract_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// rangeE is range [off, off+n) of the file p of size bytes.
func rangeE(p string, size, off, n int64) model.Entry {
	e := fileE(p, size)
	e.Off, e.Len = off, n
	return e
}

// rangeTar is the tar stream of batch id carrying the ranges es, cut
// from content, each with its BULKMOVE.range record (rec overrides it:
// "-" leaves it out).
func rangeTar(tb testing.TB, id uint64, content []byte, rec string, es ...model.Entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{wire.PAXBatch: strconv.FormatUint(id, 10)}}); err != nil {
		tb.Fatal(err)
	}
	for _, e := range es {
		data := content[e.Off : e.Off+e.DataLen()]
		h := &tar.Header{Name: e.Path, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, mtime), Format: tar.FormatPAX}
		switch rec {
		case "":
			if e.IsRange() {
				h.PAXRecords = map[string]string{wire.PAXRange: wire.FormatRange(&e)}
			}
		case "-":
		default:
			h.PAXRecords = map[string]string{wire.PAXRange: rec}
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	return buf.Bytes()
}

// sendRange receives one batch of ranges on r and commits it with the
// hashes of what content holds there, returning the ack.
func sendRange(tb testing.TB, r *extract.Receiver, id uint64, content []byte, es ...model.Entry) *wire.BatchAck {
	tb.Helper()
	m := &wire.BatchManifest{ID: id, Entries: es}
	m, err := wire.DecodeManifest(wire.EncodeManifest(m)) // as the agent gets it
	if err != nil {
		tb.Fatal(err)
	}
	txn, err := r.Receive(m, r.NeedSums(m.Entries, nil), bytes.NewReader(rangeTar(tb, id, content, "", es...)))
	if err != nil {
		tb.Fatalf("batch %d: %v", id, err)
	}
	var sums []wire.IndexedSum
	for i, e := range es {
		h := xxh3.New128()
		h.Write(content[e.Off : e.Off+e.Len])
		sums = append(sums, wire.IndexedSum{Index: i, Sum: h.Sum128().Bytes()})
	}
	return txn.CommitSums(id, nil, sums)
}

// landRange is sendRange that fails the test unless the ack is free of
// errors.
func landRange(tb testing.TB, r *extract.Receiver, id uint64, content []byte, e model.Entry) *wire.BatchAck {
	tb.Helper()
	ack := sendRange(tb, r, id, content, e)
	if len(ack.Errors) != 0 {
		tb.Fatalf("batch %d, range %d+%d: %+v", id, e.Off, e.Len, ack.Errors)
	}
	return ack
}

// receiveRanges receives batch id of the ranges es on r, cut from
// content, and leaves it uncommitted: a stream still on it.
func receiveRanges(tb testing.TB, r *extract.Receiver, id uint64, content []byte, es ...model.Entry) *extract.Txn {
	tb.Helper()
	need := make([]bool, len(es))
	for i := range need {
		need[i] = true
	}
	txn, err := r.Receive(&wire.BatchManifest{ID: id, Entries: es}, need, bytes.NewReader(rangeTar(tb, id, content, "", es...)))
	if err != nil {
		tb.Fatalf("batch %d: %v", id, err)
	}
	return txn
}

// splitFile is a file p of size random bytes cut in ranges of step bytes
// (the last one what is left): its content, and its ranges in order.
func splitFile(p string, size, step int64) ([]byte, []model.Entry) {
	var es []model.Entry
	for off := int64(0); off < size; off += step {
		es = append(es, rangeE(p, size, off, min(step, size-off)))
	}
	return randomContent(int(size)), es
}

func randomContent(n int) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// partials lists the partial files under root.
func partials(tb testing.TB, root string) []string {
	tb.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), extract.TempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// The ranges of one file, in any order, through two receivers (two agent
// processes) on one root, land in one partial; the file takes its name,
// content, mode and mtime only with the last, and no temporary remains.
func TestRangeAssemble(t *testing.T) {
	s := newSandbox(t)
	r1 := s.open(t, extract.Options{})
	r2 := s.open(t, extract.Options{NamedTemps: true})
	const size = 1<<20 + 123
	content, es := splitFile("d/big", size, 256<<10)
	order := []int{3, 0, 4, 2, 1}
	for k, i := range order {
		r := r1
		if k%2 == 1 {
			r = r2
		}
		ack := sendRange(t, r, uint64(k+1), content, es[i])
		if len(ack.Errors) != 0 {
			t.Fatalf("range %d: %+v", i, ack.Errors)
		}
		_, err := os.Lstat(filepath.Join(s.root, "d/big"))
		if last := k == len(order)-1; last != (err == nil) {
			t.Fatalf("after %d of %d ranges: the file exists: %v", k+1, len(order), err == nil)
		}
		if want := int64(0); k == len(order)-1 && ack.Files != 1 || k < len(order)-1 && ack.Files != want {
			t.Errorf("range %d: ack counts %d files", i, ack.Files)
		}
	}
	checkFile(t, s.root, fileE("d/big", size), string(content))
	if p := partials(t, s.root); len(p) != 0 {
		t.Errorf("temporaries left: %v", p)
	}
	// Now in place: a rerun needs none of its ranges.
	for i, n := range r1.Need(es) {
		if n {
			t.Errorf("range %d needed again after the file landed", i)
		}
	}
	s.check(t)
}

// A rerun (a new receiver) is not asked for the ranges an interrupted run
// recorded, only for the others, and completes the file with them.
func TestRangeResume(t *testing.T) {
	s := newSandbox(t)
	const size = 600_000
	content, es := splitFile("big", size, 200_000)
	r1 := s.open(t, extract.Options{})
	landRange(t, r1, 1, content, es[0])
	landRange(t, r1, 2, content, es[2])
	r1.Close()
	r2 := s.open(t, extract.Options{})
	need := r2.Need(es)
	if need[0] || !need[1] || need[2] {
		t.Fatalf("need after resume = %v, want [false true false]", need)
	}
	// A stream that sends a recorded range all the same (its ack was
	// lost) is told it landed; nothing is written twice.
	txn := receiveRanges(t, r2, 3, content, es[0])
	if ack := txn.Commit(3, nil); len(ack.Errors) != 0 || ack.Skipped != 1 {
		t.Fatalf("a landed range again: %+v", ack)
	}
	if ack := sendRange(t, r2, 4, content, es[1]); len(ack.Errors) != 0 || ack.Files != 1 {
		t.Fatalf("the last range: %+v", ack)
	}
	checkFile(t, s.root, fileE("big", size), string(content))
	s.check(t)
}

// A range withdrawn by its sender (the source changed while read) takes
// the partial with it: a range of the old version written meanwhile is
// not recorded, and nothing lands under the file's name.
func TestRangeDiscard(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	content, es := splitFile("f", 300_000, 100_000)
	landRange(t, r, 1, content, es[0])
	// Range 2 is written (a stream still on it) while range 1 is withdrawn.
	t2 := receiveRanges(t, r, 3, content, es[2])
	t1 := receiveRanges(t, r, 2, content, es[1])
	if ack := t1.Commit(2, []wire.Discard{{Index: 0, Reason: "changed"}}); len(ack.Errors) != 0 {
		t.Fatal(ack.Errors)
	}
	if p := partials(t, s.root); len(p) != 0 {
		t.Fatalf("the partial survived a withdrawn range: %v", p)
	}
	ack := t2.Commit(3, nil)
	if len(ack.Errors) != 1 || !strings.Contains(ack.Errors[0].Msg, "discarded") {
		t.Fatalf("a range of a discarded partial: %+v", ack.Errors)
	}
	if _, err := os.Lstat(filepath.Join(s.root, "f")); err == nil {
		t.Fatal("the file landed")
	}
	s.check(t)
}

// A range that does not hash to the sender's is not recorded: it is
// needed again, and the file does not land until it comes intact.
func TestRangeCorrupt(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	const size = 200_000
	content, es := splitFile("f", size, 100_000)
	landRange(t, r, 1, content, es[0])
	bad := append([]byte(nil), content...)
	bad[150_000] ^= 1
	txn := receiveRanges(t, r, 2, bad, es[1])
	h := xxh3.New128()
	h.Write(content[100_000:])
	ack := txn.CommitSums(2, nil, []wire.IndexedSum{{Index: 0, Sum: h.Sum128().Bytes()}})
	if len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeCorrupt {
		t.Fatalf("corrupt range: %+v", ack.Errors)
	}
	if need := r.Need(es); need[0] || !need[1] {
		t.Fatalf("need = %v after a corrupt range", need)
	}
	if ack := sendRange(t, r, 3, content, es[1]); len(ack.Errors) != 0 || ack.Files != 1 {
		t.Fatalf("%+v", ack)
	}
	checkFile(t, s.root, fileE("f", size), string(content))
	s.check(t)
}

// Hostile ranges are refused, with errors that say what is wrong: beyond
// the file, overlapping in a manifest or with what landed, a range in the
// tar stream of a file the manifest does not split, or another range
// than the manifest's.
func TestRangeHostile(t *testing.T) {
	content := randomContent(4096)
	t.Run("beyond the size", func(t *testing.T) {
		for _, e := range []model.Entry{rangeE("f", 1000, 900, 200), rangeE("f", 1000, -1, 10), rangeE("f", 1000, 1<<62, 1<<62)} {
			_, err := wire.DecodeManifest(wire.EncodeManifest(&wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}))
			if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "does not lie within") {
				t.Errorf("range %d+%d of 1000 bytes: %v", e.Off, e.Len, err)
			}
		}
		// Without the wire (a local stream), Write refuses it too.
		s := newSandbox(t)
		r := s.open(t, extract.Options{})
		txn := r.Begin([]model.Entry{rangeE("f", 1000, 900, 200)})
		txn.Write(0, bytes.NewReader(content[:200]))
		ack := txn.Commit(1, nil)
		if len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeInvalid || !strings.Contains(ack.Errors[0].Msg, "does not lie within") {
			t.Errorf("local: %+v", ack.Errors)
		}
		s.check(t)
	})
	t.Run("overlapping in a manifest", func(t *testing.T) {
		m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{rangeE("f", 1000, 0, 500), rangeE("g", 1000, 0, 500), rangeE("f", 1000, 400, 600)}}
		_, err := wire.DecodeManifest(wire.EncodeManifest(m))
		if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "overlap") {
			t.Errorf("%v", err)
		}
		m.Entries[2] = rangeE("f", 2000, 500, 500)
		if _, err := wire.DecodeManifest(wire.EncodeManifest(m)); err == nil || !strings.Contains(err.Error(), "two versions") {
			t.Errorf("%v", err)
		}
	})
	t.Run("overlapping what landed", func(t *testing.T) {
		s := newSandbox(t)
		r := s.open(t, extract.Options{})
		landRange(t, r, 1, content, rangeE("f", 4096, 0, 2048))
		ack := sendRange(t, r, 2, content, rangeE("f", 4096, 1024, 2048))
		if len(ack.Errors) != 1 || ack.Errors[0].Code != wire.CodeInvalid || !strings.Contains(ack.Errors[0].Msg, "overlaps bytes already received") {
			t.Fatalf("%+v", ack.Errors)
		}
		if _, err := os.Lstat(filepath.Join(s.root, "f")); err == nil {
			t.Fatal("the file landed")
		}
	})
	t.Run("a range of a file not split", func(t *testing.T) {
		s := newSandbox(t)
		r := s.open(t, extract.Options{})
		e := fileE("f", 100)
		m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}
		_, err := r.Receive(m, []bool{true}, bytes.NewReader(rangeTar(t, 1, content, "0:100", e)))
		if !errors.Is(err, extract.ErrStream) || !strings.Contains(err.Error(), "does not announce as split") {
			t.Errorf("%v", err)
		}
		s.check(t)
	})
	t.Run("another range than the manifest's", func(t *testing.T) {
		s := newSandbox(t)
		r := s.open(t, extract.Options{})
		e := rangeE("f", 4096, 0, 1024)
		for _, rec := range []string{"-", "1024:1024"} {
			m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{e}}
			_, err := r.Receive(m, []bool{true}, bytes.NewReader(rangeTar(t, 1, content, rec, e)))
			if !errors.Is(err, extract.ErrStream) || !strings.Contains(err.Error(), "the manifest's is") {
				t.Errorf("record %q: %v", rec, err)
			}
		}
		s.check(t)
	})
}

// Two copies of the last range in flight at once (a stream given it again
// while another still wrote it): the first completes the file; the second,
// which wrote the same bytes into what is now the file, is no error and
// leaves the file's mtime as the sender's.
func TestRangeDuplicate(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	const size = 200_000
	content, es := splitFile("f", size, 100_000)
	landRange(t, r, 1, content, es[0])
	txns := []*extract.Txn{receiveRanges(t, r, 2, content, es[1]), receiveRanges(t, r, 3, content, es[1])}
	if ack := txns[0].Commit(2, nil); len(ack.Errors) != 0 || ack.Files != 1 {
		t.Fatalf("first copy: %+v", ack)
	}
	if ack := txns[1].Commit(3, nil); len(ack.Errors) != 0 || ack.Files != 0 {
		t.Fatalf("second copy: %+v", ack)
	}
	checkFile(t, s.root, fileE("f", size), string(content))
	s.check(t)
}

// A copy of a range that arrives after its file was completed (a stream
// given it again) begins no partial: it counts as up to date, and nothing
// is left behind.
func TestRangeAfterCompletion(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	const size = 200_000
	content, es := splitFile("f", size, 100_000)
	late := r.Begin(es[1:]) // Need was asked before the file landed
	for id, e := range es {
		landRange(t, r, uint64(id+1), content, e)
	}
	late.Write(0, bytes.NewReader(content[100_000:]))
	if ack := late.Commit(3, nil); len(ack.Errors) != 0 || ack.Files != 0 {
		t.Fatalf("late copy: %+v", ack)
	}
	checkFile(t, s.root, fileE("f", size), string(content))
	s.check(t)
}
