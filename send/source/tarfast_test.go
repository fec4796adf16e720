package source

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// TestFastHeaderMatchesArchiveTar: the fast USTAR encoder writes the very
// bytes archive/tar writes for the same header, and archive/tar reads back
// every entry, fast or not.
func TestFastHeaderMatchesArchiveTar(t *testing.T) {
	entries := []model.Entry{
		{Path: "a", Size: 0, Mode: 0o644, MTime: 1700000000123456789},
		{Path: "d0001/f001", Size: 1024, Mode: 0o755, MTime: 1e9, UID: 1000, GID: 100},
		{Path: "x/y/z.bin", Size: 513, Mode: 0o600 | fs.ModeSetuid, MTime: 0, UID: maxOctal7, GID: maxOctal7},
		{Path: strings.Repeat("n", 100), Size: 511, Mode: 0o444, MTime: maxOctal11 * 1e9},
		{Path: "with space/and\nnewline", Size: 7, Mode: 0o640, MTime: 5e9},
		// Not for the fast path: long, non-ASCII, big ids.
		{Path: strings.Repeat("long/", 30) + "f", Size: 3, Mode: 0o644, MTime: 2e9},
		{Path: "caf\xc3\xa9", Size: 3, Mode: 0o644, MTime: 2e9},
		{Path: "bad\xff", Size: 3, Mode: 0o644, MTime: 2e9},
		{Path: "bigid", Size: 3, Mode: 0o644, MTime: 2e9, UID: 1 << 22},
	}
	var got bytes.Buffer
	ts := newTarStream(&got)
	for i := range entries {
		e := &entries[i]
		w, err := ts.begin(e)
		if err != nil {
			t.Fatal(err)
		}
		io.CopyN(w, zeros{}, e.Size)
		if err := ts.end(e); err != nil {
			t.Fatal(err)
		}
		if fast(e) {
			var want bytes.Buffer
			tw := tar.NewWriter(&want)
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.Path, Size: e.Size, Mode: int64(e.Mode.Perm()),
				ModTime: time.Unix(e.MTime/1e9, 0), Uid: int(e.UID), Gid: int(e.GID), Format: tar.FormatUSTAR})
			if h := got.Bytes()[got.Len()-int((e.Size+511)/512*512)-512:][:512]; !bytes.Equal(h, want.Bytes()[:512]) {
				t.Errorf("%q: fast header differs from archive/tar's:\n got %q\nwant %q", e.Path, h, want.Bytes()[:512])
			}
		}
	}
	if err := ts.close(); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&got)
	for i := range entries {
		e := &entries[i]
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("entry %d (%q): %v", i, e.Path, err)
		}
		if h.Name != e.Path || h.Size != e.Size || h.Mode != int64(e.Mode.Perm()) || h.ModTime.Unix() != e.MTime/1e9 || h.Uid != int(e.UID) {
			t.Errorf("read back %+v, want %+v", h, e)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("after the last entry: %v, want EOF", err)
	}
}

// TestWriteTarSourceBecameFIFO: over the wire too, a file the walk saw
// regular that is a FIFO when read goes as zeros, withdrawn, and is
// reported as no longer a regular file, at once.
func TestWriteTarSourceBecameFIFO(t *testing.T) {
	src := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(src, "f"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	m := &wire.BatchManifest{ID: 1, Entries: []model.Entry{{Path: "f", Kind: model.KindFile, Mode: 0o644, Size: 3, MTime: 1, Nlink: 1}}}
	type result struct {
		discards []wire.Discard
		failed   []Error
		err      error
	}
	done := make(chan result, 1)
	go func() {
		d, f, _, err := Source{Root: src}.writeTar(io.Discard, m, []bool{true}, nil, true)
		done <- result{d, f, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.discards) != 1 || len(r.failed) != 1 || !strings.Contains(r.failed[0].Err.Error(), "no longer a regular file") {
			t.Errorf("discards %v, failed %v: want f withdrawn as no longer a regular file", r.discards, r.failed)
		}
	case <-time.After(10 * time.Second):
		if fd, err := syscall.Open(filepath.Join(src, "f"), syscall.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
		<-done
		t.Fatal("writeTar waited for a writer of a FIFO that replaced a file")
	}
}
