package extract

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// PAX records of the bulkmove vendor namespace, ignored by other tar readers.
const (
	PAXBatch = "BULKMOVE.batch" // in the global header that opens each batch
)

// ErrStream marks a data stream that does not match its manifest; the
// connection cannot continue after it.
var ErrStream = errors.New("bad data stream")

// ExtractTar reads the data of batch id from r: a tar stream holding the
// needed regular files of the manifest, in manifest order (the sender may
// leave some out), each header matching its manifest entry by name, type
// and size. It returns when the tar stream ends. Entry failures are
// recorded in the Txn; an error is returned only when the stream itself is
// bad, and names the entry.
func (t *Txn) ExtractTar(id uint64, r io.Reader, need []bool) error {
	tr := tar.NewReader(r)
	next := 0
	last := ""
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			// The header is unreadable: name what came before and what was due.
			where := "at the start"
			if last != "" {
				where = fmt.Sprintf("after entry %q", last)
			}
			for j := next; j < len(t.entries); j++ {
				if t.entries[j].Kind == sharder.KindFile && need[j] {
					where += fmt.Sprintf(", where %q was due", t.entries[j].Path)
					break
				}
			}
			return fmt.Errorf("%w: batch %d: reading a tar header %s: %v", ErrStream, id, where, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			if v, ok := hdr.PAXRecords[PAXBatch]; ok && v != strconv.FormatUint(id, 10) {
				return fmt.Errorf("%w: data of batch %s sent as batch %d", ErrStream, v, id)
			}
			continue
		}
		j := next
		for j < len(t.entries) && (t.entries[j].Path != hdr.Name || t.entries[j].Kind != sharder.KindFile || !need[j]) {
			j++
		}
		if j == len(t.entries) {
			return fmt.Errorf("%w: batch %d: tar entry %q is not a needed file of the manifest (or out of order)", ErrStream, id, hdr.Name)
		}
		e := &t.entries[j]
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%w: batch %d: tar entry %q has type %q, want a regular file", ErrStream, id, hdr.Name, hdr.Typeflag)
		}
		// A sparse entry declares more bytes than it carries (the reader
		// fills holes with zeros): a few bytes on the wire could fill the
		// disk. The sender never writes them.
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				return fmt.Errorf("%w: batch %d: tar entry %q is a sparse file", ErrStream, id, hdr.Name)
			}
		}
		x, err := t.r.opt.tarExtra(hdr, e) // extended attributes, a sparse map
		if err != nil {
			return fmt.Errorf("%w: batch %d: tar entry %q: %v", ErrStream, id, hdr.Name, err)
		}
		if x.dense() && hdr.Size != e.Size {
			return fmt.Errorf("%w: batch %d: tar entry %q declares %d bytes, the manifest %d", ErrStream, id, hdr.Name, hdr.Size, e.Size)
		}
		var src io.Reader = tr
		if x != nil {
			x.R, src = tr, x
		}
		if err := t.Write(j, src); err != nil {
			return fmt.Errorf("%w: batch %d: entry %q: %v", ErrStream, id, hdr.Name, err)
		}
		next = j + 1
		last = hdr.Name
	}
}

// ApplyFinal applies every entry of a final batch in order.
func (t *Txn) ApplyFinal() {
	for i := range t.entries {
		t.Apply(i)
	}
}

// Receive applies one batch that arrives as a manifest and a tar stream:
// the agent's whole job for a batch, shared with tests and the fuzzer.
func (r *Receiver) Receive(m *wire.BatchManifest, need []bool, data io.Reader) (*Txn, error) {
	t := r.Begin(m.Entries)
	if err := t.SetXattrs(m.Xattrs); err != nil {
		return nil, fmt.Errorf("%w: batch %d: %v", ErrStream, m.ID, err)
	}
	if m.Flags&wire.FlagFinal != 0 {
		t.ApplyFinal()
		// A final batch carries no file data: Apply has refused its file
		// entries, and its symlinks now exist, so nothing may be written
		// after them.
		need = make([]bool, len(m.Entries))
	} else {
		for i, n := range need {
			if !n && m.Entries[i].Kind == sharder.KindFile {
				t.Skip(i)
			}
		}
	}
	if err := t.ExtractTar(m.ID, data, need); err != nil {
		t.Abort()
		return nil, err
	}
	return t, nil
}
