package extract

// A batch's data: ExtractTar reads the tar stream of a batch and writes
// its files (small ones by several writers at once on a slow
// filesystem), ApplyFinal applies a final batch's directories and links,
// and Receive does a whole batch, manifest and stream.

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
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
	tr := newTarReader(r)
	next := 0
	last := ""
	// On a slow filesystem, small files are read off the stream into
	// memory and written by several goroutines at once.
	w := t.startWriters()
	defer w.wait()
	// Else small files are created a group at a time (ringwrite.go).
	if w == nil {
		t.q = t.startQueue()
		defer t.stopQueue(t.q)
	}
	for {
		// The name due next, which the header most likely bears.
		tr.want = ""
		for j := next; j < len(t.entries); j++ {
			if t.entries[j].Kind == model.KindFile && need[j] {
				tr.want = t.entries[j].Path
				break
			}
		}
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
				if t.entries[j].Kind == model.KindFile && need[j] {
					where += fmt.Sprintf(", where %q was due", t.entries[j].Path)
					break
				}
			}
			return fmt.Errorf("%w: batch %s: reading a tar header %s: %v", ErrStream, batchname.Name(id), where, err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			if v, ok := hdr.PAXRecords[wire.PAXBatch]; ok && v != strconv.FormatUint(id, 10) {
				got := v
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					got = batchname.Name(n)
				}
				return fmt.Errorf("%w: data of batch %s sent as batch %s", ErrStream, got, batchname.Name(id))
			}
			continue
		}
		j := next
		for j < len(t.entries) && (t.entries[j].Path != hdr.Name || t.entries[j].Kind != model.KindFile || !need[j]) {
			j++
		}
		if j == len(t.entries) {
			return fmt.Errorf("%w: batch %s: tar entry %q is not a needed file of the manifest (or out of order)", ErrStream, batchname.Name(id), hdr.Name)
		}
		e := &t.entries[j]
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%w: batch %s: tar entry %q has type %q, want a regular file", ErrStream, batchname.Name(id), hdr.Name, hdr.Typeflag)
		}
		// A sparse entry declares more bytes than it carries (the reader
		// fills holes with zeros): a few bytes on the wire could fill the
		// disk. The sender never writes them.
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				return fmt.Errorf("%w: batch %s: tar entry %q is a sparse file", ErrStream, batchname.Name(id), hdr.Name)
			}
		}
		// A range of a split file names itself, and only a range may.
		if v, ok := hdr.PAXRecords[wire.PAXRange]; ok != e.IsRange() || ok && v != wire.FormatRange(e) {
			if !e.IsRange() {
				return fmt.Errorf("%w: batch %s: tar entry %q carries a range (%s) of a file the manifest does not announce as split", ErrStream, batchname.Name(id), hdr.Name, v)
			}
			return fmt.Errorf("%w: batch %s: tar entry %q carries range %q, the manifest's is %q", ErrStream, batchname.Name(id), hdr.Name, v, wire.FormatRange(e))
		}
		x, err := t.r.opt.tarExtra(hdr, e) // extended attributes, a sparse map
		if err == nil {
			x, err = t.deltaExtra(hdr, j, x)
		}
		if err != nil {
			return fmt.Errorf("%w: batch %s: tar entry %q: %v", ErrStream, batchname.Name(id), hdr.Name, err)
		}
		if x.dense() && hdr.Size != e.DataLen() {
			return fmt.Errorf("%w: batch %s: tar entry %q declares %d bytes, the manifest %d", ErrStream, batchname.Name(id), hdr.Name, hdr.Size, e.DataLen())
		}
		if x == nil && w.write(j, e.DataLen(), tr) {
			next, last = j+1, hdr.Name
			continue
		}
		var src io.Reader = tr
		if x != nil {
			x.R, src = tr, x
		}
		if err := t.Write(j, src); err != nil {
			return fmt.Errorf("%w: batch %s: entry %q: %v", ErrStream, batchname.Name(id), hdr.Name, err)
		}
		next = j + 1
		last = hdr.Name
	}
}

// ApplyFinal applies every entry of a final batch in order; on a slow
// filesystem, runs of entries that do not depend on each other at once:
// symlinks, devices and special files (nothing is created inside them),
// and the directories (see applyDirs).
func (t *Txn) ApplyFinal() {
	// All data is in: the staging directories go, while the rest of the
	// batch is applied (on a slow filesystem, an rmdir each under one
	// lock), and before the root's times are set.
	var staging sync.WaitGroup
	defer staging.Wait()
	for i := range t.entries {
		if t.entries[i].Path == "." {
			staging.Go(t.r.closeStage)
			break
		}
	}
	width := t.r.io.Width()
	for i := 0; i < len(t.entries); {
		j := i + 1
		if isDirBelow(&t.entries[i]) {
			for j < len(t.entries) && isDirBelow(&t.entries[j]) {
				j++
			}
			t.applyDirs(i, j, width)
			i = j
			continue
		}
		if width > 1 && t.entries[i].Kind == model.KindHardlink {
			j = independentLinks(t.entries, i)
		}
		for j < len(t.entries) && width > 1 && leaf(t.entries[i].Kind) && leaf(t.entries[j].Kind) {
			j++
		}
		if t.entries[i].Path == "." {
			staging.Wait()
		}
		ioconc.ForEach(j-i, width, func(_, k int) { t.Apply(i + k) })
		i = j
	}
}

// leaf reports whether entries of kind k may be made in any order: nothing
// is made inside a symlink, a device or a special file.
func leaf(k model.Kind) bool { return k == model.KindSymlink || k.IsDevice() || k.IsSpecial() }

// isDirBelow reports whether e is a directory other than the root.
func isDirBelow(e *model.Entry) bool { return e.Kind == model.KindDir && e.Path != "." }

// dirChunk is how many directories of a final batch applyDirs holds open
// at once.
const dirChunk = 256

// applyDirs applies the directories entries[i:j] of a final batch (not the
// root), dirChunk at a time: every directory of a chunk made if missing
// and opened, then every one's owner, mode, mtime and extended attributes
// set through its descriptor, as many at once as the filesystem allows.
// Nothing is created in a directory after its mtime is set: the chunk's
// directories are all made before any gets its metadata, and the sender
// sends the deeper ones first, so a directory's subdirectories are in its
// chunk or an earlier one. Nor does a mode set early shut the way to what
// is below (a directory without search permission): the chunk's
// directories are opened before any gets its mode. Applied one depth at a
// time, each waiting for the one below, a deep tree on a slow filesystem
// pays a round trip per name of every directory's path, one depth after
// the other.
func (t *Txn) applyDirs(i, j, width int) {
	for c := i; c < j; c += dirChunk {
		n := min(dirChunk, j-c)
		fds := make([]*os.File, n)
		ioconc.ForEach(n, width, func(_, k int) {
			if t.checkName(c+k) == nil {
				fds[k] = t.openDirEntry(c+k, &t.entries[c+k])
			}
		})
		ioconc.ForEach(n, width, func(_, k int) {
			if f := fds[k]; f != nil {
				t.setDirMeta(c+k, &t.entries[c+k], f)
				f.Close()
			}
		})
	}
}

// independentLinks returns the end of the run of hard links from entries[i]
// that may be made in any order: up to (not including) the first whose
// path is made or targeted earlier in the run, or whose target is made
// earlier in it (one may replace another's target). Links to one target
// are independent.
func independentLinks(entries []model.Entry, i int) int {
	made, targets := map[string]bool{}, map[string]bool{}
	j := i
	for ; j < len(entries) && entries[j].Kind == model.KindHardlink; j++ {
		e := &entries[j]
		if made[e.Path] || targets[e.Path] || made[e.Link] {
			break
		}
		made[e.Path], targets[e.Link] = true, true
	}
	return max(j, i+1)
}

// Receive applies one batch that arrives as a manifest and a tar stream:
// the agent's whole job for a batch, shared with tests and the fuzzer.
func (r *Receiver) Receive(m *wire.BatchManifest, need []bool, data io.Reader) (*Txn, error) {
	return r.ReceiveDeltas(m, need, nil, data)
}

// ReceiveDeltas is Receive for a batch whose need list PrepareDeltas
// made d for: the files that come as a block delta are written into
// their temporaries, and those d refused fail.
func (r *Receiver) ReceiveDeltas(m *wire.BatchManifest, need []bool, d *Deltas, data io.Reader) (*Txn, error) {
	t := r.Begin(m.Entries)
	t.UseDeltas(d)
	if err := t.SetXattrs(m.Xattrs); err != nil {
		d.Close()
		return nil, fmt.Errorf("%w: batch %s: %v", ErrStream, batchname.Name(m.ID), err)
	}
	if m.Flags&wire.FlagFinal != 0 {
		t.ApplyFinal()
		// A final batch carries no file data: Apply has refused its file
		// entries, and its symlinks now exist, so nothing may be written
		// after them.
		need = make([]bool, len(m.Entries))
	} else {
		for i, n := range need {
			if !n && m.Entries[i].Kind == model.KindFile && d.Failed(i) == nil {
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

// bodyMax is the largest file written by a writer goroutine: read whole
// into memory first. Larger files are written by the stream's goroutine,
// as they arrive.
const bodyMax = 256 << 10

var bodyPool = sync.Pool{New: func() any { b := make([]byte, bodyMax); return &b }}

// writers write small files of a batch concurrently: at most cap(sem) at
// once, each holding one buffer of at most bodyMax.
type writers struct {
	t   *Txn
	sem chan struct{}
	wg  sync.WaitGroup
}

func (t *Txn) startWriters() *writers {
	n := t.r.io.Width()
	if n <= 1 {
		return nil
	}
	return &writers{t: t, sem: make(chan struct{}, n)}
}

// write reads entry i's body of size bytes from r and hands it to a writer
// goroutine; false means the caller must write it itself (no writers, or
// too large). A short body is left to the caller too, whose Write reports
// it as the stream error it is.
func (w *writers) write(i int, size int64, r io.Reader) bool {
	if w == nil || size > bodyMax {
		return false
	}
	if e := &w.t.entries[i]; e.Kind != model.KindFile || CheckName(e.Path, e.Kind) != nil {
		return false // refused by Write, which fails the stream
	}
	w.sem <- struct{}{}
	bp := bodyPool.Get().(*[]byte)
	buf := (*bp)[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		bodyPool.Put(bp)
		<-w.sem
		// What was read is gone: hand the caller an empty stream, so that
		// its Write fails on the short body, naming the entry.
		return false
	}
	w.wg.Go(func() {
		defer func() { bodyPool.Put(bp); <-w.sem }()
		w.t.Write(i, bytes.NewReader(buf))
	})
	return true
}

// wait returns when every file handed to a writer is written.
func (w *writers) wait() {
	if w != nil {
		w.wg.Wait()
	}
}
