package extract_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
)

// stallReader yields data, then says so on stalled and waits for release
// before failing: a peer that stops sending mid-file.
type stallReader struct {
	data     []byte
	stalled  chan struct{}
	release  chan struct{}
	stallOne bool
}

func (s *stallReader) Read(p []byte) (int, error) {
	if len(s.data) > 0 {
		n := copy(p, s.data)
		s.data = s.data[n:]
		return n, nil
	}
	if !s.stallOne {
		s.stallOne = true
		close(s.stalled)
	}
	<-s.release
	return 0, io.ErrUnexpectedEOF
}

// allocated is the space the regular files under dir hold on disk.
func allocated(t *testing.T, dir string) (total int64, files int) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			total += st.Blocks * 512
			files++
		}
		return nil
	})
	return total, files
}

// TestPreallocationFollowsData: a peer that declares a file of 1 GiB and
// sends 10 bytes of it reserves no more than 8 MiB at DEST (preallocation
// runs at most that far ahead of the data), while it stalls and after it
// gives up: a file written under its name in a directory the receiver
// made, a named temporary, and a range of a split file in its partial.
func TestPreallocationFollowsData(t *testing.T) {
	const size = 1 << 30
	const limit = 8<<20 + 1<<20 // 8 MiB ahead, and a margin for the filesystem's own blocks
	for _, c := range []struct {
		name  string
		opt   extract.Options
		entry model.Entry
	}{
		{"in place", extract.Options{}, fileE("new/big", size)},
		{"named temporary", extract.Options{NamedTemps: true}, fileE("old/big", size)},
		{"range", extract.Options{}, rangeE("old/big", size, 0, size/2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t)
			if err := os.Mkdir(filepath.Join(s.root, "old"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := s.open(t, c.opt)
			tx := r.Begin([]model.Entry{c.entry})
			src := &stallReader{data: []byte("0123456789"), stalled: make(chan struct{}), release: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- tx.Write(0, src) }()
			select {
			case <-src.stalled:
			case err := <-done:
				t.Fatalf("Write returned before the data stalled: %v", err)
			}
			// While the peer stalls: the file is there, and small.
			for range 20 {
				n, files := allocated(t, s.root)
				if files != 1 {
					t.Fatalf("%d files under the root while the file is written, want its one", files)
				}
				if n > limit {
					t.Fatalf("%d bytes allocated for a file of which 10 bytes arrived, want at most %d", n, limit)
				}
				time.Sleep(5 * time.Millisecond)
			}
			close(src.release)
			if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("Write after the peer gave up: %v, want the stream's error", err)
			}
			tx.Abort()
			if n, _ := allocated(t, s.root); n > limit {
				t.Errorf("%d bytes allocated after the peer gave up, want at most %d", n, limit)
			}
		})
	}
}

// TestPreallocatedInSteps: a file that arrives in full past several steps
// of preallocation, whole or as a range, lands with its exact size and
// content.
func TestPreallocatedInSteps(t *testing.T) {
	const size = 9<<20 + 12345
	content := randomContent(size)
	s := newSandbox(t)
	r := s.open(t, extract.Options{})
	tx := r.Begin([]model.Entry{fileE("d/whole", size)})
	if err := tx.Write(0, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if ack := tx.Commit(1, nil); len(ack.Errors) != 0 {
		t.Fatalf("whole: %+v", ack.Errors)
	}
	checkFile(t, s.root, fileE("d/whole", size), string(content))

	const cut = 1<<20 + 5 // the second range begins off a step, and ends after two
	es := []model.Entry{rangeE("d/split", size, 0, cut), rangeE("d/split", size, cut, size-cut)}
	for k, e := range es {
		landRange(t, r, uint64(2+k), content, e)
	}
	checkFile(t, s.root, fileE("d/split", size), string(content))
	s.check(t)
}
