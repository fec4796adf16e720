package extract

import (
	"archive/tar"
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// smallBatch is a batch of n files of 1000 bytes in the new directory dir, as
// the sender sends them: manifest, tar stream, and the sender's hashes.
type smallBatch struct {
	m    *wire.BatchManifest
	need []bool
	tar  []byte
	sums []wire.IndexedSum
}

func newSmallBatch(tb testing.TB, id uint64, dir string, n int) smallBatch {
	tb.Helper()
	b := smallBatch{m: &wire.BatchManifest{ID: id}, need: make([]bool, n)}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{wire.PAXBatch: fmt.Sprint(id)}})
	body := bytes.Repeat([]byte("0123456789"), 100) // padded to its block
	mtime := time.Unix(1_700_000_000, 0)
	for i := range n {
		p := fmt.Sprintf("%s/f%05d", dir, i)
		b.m.Entries = append(b.m.Entries, model.Entry{Path: p, Kind: model.KindFile, Mode: 0o644, Size: int64(len(body)), MTime: mtime.UnixNano(), Nlink: 1})
		b.need[i] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: int64(len(body)), Mode: 0o644, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
			tb.Fatal(err)
		}
		tw.Write(body)
		b.sums = append(b.sums, wire.IndexedSum{Index: i, Sum: wire.HashBytes(body)})
	}
	tw.Close()
	b.tar = buf.Bytes()
	return b
}

// receiveAllocsPerFile is how many allocations the receiver makes for
// each further small file of a batch, from its tar stream to its commit
// (what a batch costs whatever its size is left out: the difference
// between a batch of 2n files and one of n). Each run lands in a new
// directory, as a first copy does.
func receiveAllocsPerFile(t *testing.T) float64 {
	const n, runs = 100, 10
	r, err := Open(t.TempDir(), Options{IOConcurrency: 1}) // a local disk: one file at a time
	if err != nil {
		t.Fatal(err)
	}
	measure := func(k int) float64 {
		batches := make([]smallBatch, runs+1)
		for j := range batches {
			batches[j] = newSmallBatch(t, uint64(j+1), fmt.Sprintf("n%d-r%d", k, j), k)
		}
		j := 0
		return testing.AllocsPerRun(runs, func() {
			b := &batches[j]
			j++
			txn, err := r.Receive(b.m, b.need, bytes.NewReader(b.tar))
			if err != nil {
				t.Fatal(err)
			}
			if ack := txn.CommitSums(b.m.ID, nil, b.sums); len(ack.Errors) != 0 || ack.Files != int64(k) {
				t.Fatalf("ack: %d files, errors %v", ack.Files, ack.Errors)
			}
		})
	}
	return (measure(2*n) - measure(n)) / n
}

func TestReceiveAllocsPerFile(t *testing.T) {
	a := receiveAllocsPerFile(t)
	t.Logf("%.2f allocations per small file", a)
	if a > 1.5 {
		t.Errorf("%.2f allocations per small file, want at most 1", a)
	}
}

// TestTarReaderAllocs: reading a header of the sender's fast path costs
// nothing when its name is the one the manifest expects next.
func TestTarReaderAllocs(t *testing.T) {
	const runs = 100
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var names []string
	for i := range runs + 1 {
		names = append(names, fmt.Sprintf("d/f%05d", i))
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: names[i], Size: 1000, Mode: 0o644, ModTime: time.Unix(1e9, 0), Format: tar.FormatUSTAR})
		tw.Write(make([]byte, 1000))
	}
	tw.Close()
	tr := newTarReader(bytes.NewReader(buf.Bytes()))
	body := make([]byte, 1024)
	k := 0
	a := testing.AllocsPerRun(runs, func() {
		tr.want = names[k]
		h, err := tr.Next()
		if err != nil || h.Name != names[k] || h.Size != 1000 || tr.tr != nil {
			t.Fatalf("entry %d: %+v, %v", k, h, err)
		}
		tr.Read(body)
		k++
	})
	if a != 0 {
		t.Errorf("%v allocations a header, want none", a)
	}
}
