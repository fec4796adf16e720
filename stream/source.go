package stream

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/extract"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// ErrChanged marks a source file that changed between the walk and the
// send, or while being read. It is reported, never installed.
var ErrChanged = errors.New("file changed")

// Source opens the files of a batch under a source root.
type Source struct {
	Root string // the directory entry paths are relative to
	File string // if set, the one file every entry reads (a single-file SRC)
}

// Open opens entry e for reading and checks it is still the regular file
// the walk saw (same size and mtime).
func (s Source) Open(e *sharder.Entry) (*os.File, error) {
	name := filepath.Join(s.Root, filepath.FromSlash(e.Path))
	if s.File != "" {
		name = s.File
	}
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) { // O_NOATIME needs ownership
		f, err = os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w: vanished since the walk", name, ErrChanged)
		}
		return nil, fmt.Errorf("read %s: %w", name, unwrapPath(err))
	}
	if err := s.same(f, e, "since the walk"); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Recheck reports whether f changed while being read.
func (s Source) Recheck(f *os.File, e *sharder.Entry) error {
	return s.same(f, e, "while being read")
}

func (s Source) same(f *os.File, e *sharder.Entry, when string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("read %s: %w: no longer a regular file", f.Name(), ErrChanged)
	}
	if fi.Size() != e.Size || fi.ModTime().UnixNano() != e.MTime {
		return fmt.Errorf("read %s: %w %s (size %d, was %d; mtime %s, was %s)", f.Name(), ErrChanged, when,
			fi.Size(), e.Size, fi.ModTime().Format(time.RFC3339Nano), e.ModTime().Format(time.RFC3339Nano))
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// zeros pads a file that shrank mid-read, to keep the tar stream in step.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// SourceError is a file the sender could not send, with why.
type SourceError struct {
	Index int
	Err   error
}

// WriteTar writes the needed files of batch b as a tar stream to w and
// returns the entries to discard (changed while read) and the entries that
// could not be sent at all. A non-nil error means w failed: the stream is
// broken.
func (s Source) WriteTar(w io.Writer, b *wire.BatchManifest, need []bool, sent func(n int64)) (discards []wire.Discard, failed []SourceError, err error) {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag:   tar.TypeXGlobalHeader,
		Name:       "pax_global_header",
		PAXRecords: map[string]string{extract.PAXBatch: strconv.FormatUint(b.ID, 10)},
	}); err != nil {
		return nil, nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Kind != sharder.KindFile || !need[i] {
			continue
		}
		f, oerr := s.Open(e)
		if oerr != nil {
			failed = append(failed, SourceError{i, oerr})
			continue
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.Path,
			Size:     e.Size,
			Mode:     int64(e.Mode.Perm()),
			ModTime:  time.Unix(e.MTime/1e9, 0),
			Uid:      int(e.UID),
			Gid:      int(e.GID),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return nil, nil, err
		}
		src := &readTracker{r: io.LimitReader(f, e.Size)}
		n, werr := io.CopyBuffer(tw, src, *bp)
		if werr != nil && src.err == nil {
			f.Close()
			return nil, nil, werr
		}
		if n < e.Size { // shrank, or a read error: pad, and withdraw it
			if _, err := io.CopyBuffer(tw, io.LimitReader(zeros{}, e.Size-n), *bp); err != nil {
				f.Close()
				return nil, nil, err
			}
			why := src.err
			if why == nil {
				why = fmt.Errorf("read %s: %w while being read (shrank to %d bytes)", f.Name(), ErrChanged, n)
			}
			failed = append(failed, SourceError{i, why})
			discards = append(discards, wire.Discard{Index: i, Reason: why.Error()})
		} else if cerr := s.Recheck(f, e); cerr != nil {
			failed = append(failed, SourceError{i, cerr})
			discards = append(discards, wire.Discard{Index: i, Reason: cerr.Error()})
		}
		f.Close()
		if sent != nil {
			sent(e.Size)
		}
	}
	return discards, failed, tw.Close()
}

// readTracker remembers a read error, to tell a failure of the source file
// (only that file is lost) from a failure of the stream (all is lost).
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}
