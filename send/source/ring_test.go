//go:build linux

package source

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/uring"
	"github.com/bulkmove/bulkmove/metrics"
)

// readCalls is how many read(2)-family system calls this process has made.
func readCalls(t *testing.T) int { return int(procIO(t, "syscr")) }

// TestRingReadsSmallFiles: a batch of small files goes into the tar stream
// exactly as the one-by-one way sends it, files that changed since the walk
// included (each withdrawn for the same reason), but read through the ring:
// far fewer read(2) calls than files.
func TestRingReadsSmallFiles(t *testing.T) {
	if r := uring.Get(); r == nil {
		t.Skip("no io_uring here")
	} else {
		uring.Put(r, false)
	}
	const n = 200
	root, m, need := smallBatch(t, n, 1024)
	at := func(i int) string { return filepath.Join(root, m.Entries[i].Path) }
	// Changed since the walk: shorter, longer, touched, gone, a FIFO, a symlink.
	if err := os.WriteFile(at(3), make([]byte, 500), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at(40), make([]byte, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(at(77), time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(at(100)); err != nil {
		t.Fatal(err)
	}
	os.Remove(at(150))
	if err := unix.Mkfifo(at(150), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(at(199))
	if err := os.Symlink("f00000", at(199)); err != nil {
		t.Fatal(err)
	}

	type result struct {
		tar      []byte
		discards []string
		failed   []string
		sums     int
	}
	run := func(s Source) (result, int) {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		var ctr metrics.Stream
		before := readCalls(t)
		discards, failed, sums, err := s.writeTar(w, m, need, &ctr, true)
		calls := readCalls(t) - before
		if err != nil {
			t.Fatal(err)
		}
		w.Flush()
		r := result{tar: buf.Bytes(), sums: len(sums)}
		for _, d := range discards {
			r.discards = append(r.discards, fmt.Sprintf("%d %s", d.Index, d.Reason))
		}
		for _, f := range failed {
			r.failed = append(r.failed, fmt.Sprintf("%d %v", f.Index, f.Err))
		}
		return r, calls
	}
	ringed, ringCalls := run(Source{Root: root})
	plain, plainCalls := run(Source{Root: root}.WithOpenHook(func(string) {})) // (a hook: one by one)
	if !bytes.Equal(ringed.tar, plain.tar) {
		t.Errorf("the ring's tar stream (%d bytes) differs from the one-by-one way's (%d bytes)", len(ringed.tar), len(plain.tar))
	}
	if !reflect.DeepEqual(ringed.discards, plain.discards) || !reflect.DeepEqual(ringed.failed, plain.failed) {
		t.Errorf("through the ring: withdrawn %q, failed %q\none by one: withdrawn %q, failed %q", ringed.discards, ringed.failed, plain.discards, plain.failed)
	}
	if len(plain.failed) != 6 || ringed.sums != n-6 {
		t.Errorf("%d failed (want the 6 changed), %d sums (want %d)", len(plain.failed), ringed.sums, n-6)
	}
	t.Logf("read calls: %d through the ring, %d one by one, for %d files", ringCalls, plainCalls, n)
	if plainCalls < n-10 || ringCalls > n/10 {
		t.Errorf("%d read calls through the ring and %d one by one for %d files: want the ring to make few", ringCalls, plainCalls, n)
	}
}
