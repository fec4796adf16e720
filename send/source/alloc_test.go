package source

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// smallBatch makes n files of size bytes under a new directory and
// returns it with their batch, as the walk would see them.
func smallBatch(tb testing.TB, n int, size int) (string, *wire.BatchManifest, []bool) {
	tb.Helper()
	root := tb.TempDir()
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		tb.Fatal(err)
	}
	m := &wire.BatchManifest{ID: 7}
	data := make([]byte, size)
	for i := range n {
		p := fmt.Sprintf("d/f%05d", i)
		name := filepath.Join(root, p)
		if err := os.WriteFile(name, data, 0o644); err != nil {
			tb.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(name, &st); err != nil {
			tb.Fatal(err)
		}
		m.Entries = append(m.Entries, model.Entry{Path: p, Kind: model.KindFile, Mode: 0o644, Size: st.Size, MTime: st.Mtim.Nano(), Nlink: 1})
	}
	need := make([]bool, n)
	for i := range need {
		need[i] = true
	}
	return root, m, need
}

// allocsPerFile is how many allocations writeTar makes for each further
// small file of a batch (what a batch costs whatever its size is left out:
// the difference between a batch of 2n files and one of n).
func allocsPerFile(t *testing.T, hash bool) float64 {
	const n = 100
	run := func(k int) float64 {
		root, m, need := smallBatch(t, k, 1024)
		s := Source{Root: root}
		w := bufio.NewWriterSize(io.Discard, 256<<10) // as the stream's framing buffers it
		var ctr metrics.Stream
		return testing.AllocsPerRun(20, func() {
			_, failed, _, err := s.writeTar(w, m, need, &ctr, hash)
			if err != nil || len(failed) != 0 {
				t.Fatalf("writeTar: %v %v", err, failed)
			}
		})
	}
	return (run(2*n) - run(n)) / n
}

// TestWriteTarAllocsPerFile: a small file costs the sender no allocation
// of its own on its way into the tar stream, hashed or not (buffers,
// readers and header space are the batch's, reused file after file).
func TestWriteTarAllocsPerFile(t *testing.T) {
	for _, hash := range []bool{false, true} {
		a := allocsPerFile(t, hash)
		t.Logf("hash %v: %.2f allocations per small file", hash, a)
		if a > 0.5 {
			t.Errorf("hash %v: %.2f allocations per small file, want none", hash, a)
		}
	}
}

func BenchmarkWriteTarSmallFiles(b *testing.B) {
	root, m, need := smallBatch(b, 1000, 1024)
	s := Source{Root: root}
	w := bufio.NewWriterSize(io.Discard, 256<<10)
	var ctr metrics.Stream
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := s.writeTar(w, m, need, &ctr, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(m.Entries)), "ns/file")
}
