package extract_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestBufferedBodies: bodies written straight from the stream's buffer
// (those that lie in it whole) and those that straddle its end land alike,
// each hashed as it is written: a file whose data is not what the sender
// hashed fails and is removed, the others stay; without hashes (NoSums)
// every file lands.
func TestBufferedBodies(t *testing.T) {
	sizes := []int{1, 511, 512, 1000, 1500, 3000, 5000, 0, 700}
	for _, noSums := range []bool{false, true} {
		s := newSandbox(t)
		r := s.open(t, extract.Options{NoSums: noSums})
		var entries []model.Entry
		var files []tarFile
		var sums []wire.IndexedSum
		for i, n := range sizes {
			name := "new/f" + string(rune('a'+i))
			data := strings.Repeat(string(rune('A'+i)), n)
			entries = append(entries, fileE(name, int64(n)))
			files = append(files, tf(name, data))
			sum := wire.Sum(xxh3.Hash128([]byte(data)).Bytes())
			if i == 4 {
				sum[0] ^= 1 // not what arrives
			}
			sums = append(sums, wire.IndexedSum{Index: i, Sum: sum})
		}
		m := &wire.BatchManifest{ID: 1, Entries: entries}
		// A buffer of 4 KiB: some bodies lie in it whole, some do not.
		data := bufio.NewReaderSize(bytes.NewReader(tarOf(t, 1, files...)), 4096)
		txn, err := r.Receive(m, needFor(r, m), data)
		if err != nil {
			t.Fatal(err)
		}
		if noSums {
			sums = nil
		}
		ack := txn.CommitSums(1, nil, sums)
		for i, n := range sizes {
			got, err := os.ReadFile(filepath.Join(s.root, entries[i].Path))
			if i == 4 && !noSums {
				if err == nil || len(ack.Errors) != 1 || ack.Errors[0].Index != 4 || ack.Errors[0].Code != wire.CodeCorrupt {
					t.Errorf("noSums=%v: the corrupt file: %v; errors %+v", noSums, err, ack.Errors)
				}
				continue
			}
			if want := strings.Repeat(string(rune('A'+i)), n); err != nil || string(got) != want {
				t.Errorf("noSums=%v: %s: %d bytes, %v; want %d", noSums, entries[i].Path, len(got), err, n)
			}
		}
		if want := int64(len(sizes)); noSums && (ack.Files != want || len(ack.Errors) != 0) {
			t.Errorf("noSums: ack %d files, errors %+v", ack.Files, ack.Errors)
		}
		s.check(t)
	}
}
