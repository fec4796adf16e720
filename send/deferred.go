package send

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/model"
)

// Deferred collects the entries created after all file data: directories
// (metadata applied last, deepest first), symlinks (with devices and
// special files, -D) and hard links. Add is
// called from the sharder's single partitioning goroutine. The zero value
// is ready to use.
//
// Each list keeps up to Mem entries in memory and the rest on disk, in an
// unlinked temporary file in Dir (package spill): a tree of millions of
// directories or links costs the sender disk, not memory. Directories are
// kept sorted deepest first (then by path), hard links by their target,
// symlinks in the order the walk met them.
type Deferred struct {
	Dir string // where the lists that outgrow memory go; "": os.TempDir()
	Mem int    // entries each list keeps in memory; 0: spill.DefaultMem

	mu                        sync.Mutex
	dirs, symlinks, hardlinks *spill.List[model.Entry]
	err                       error
}

// deeperFirst orders directories as their metadata is applied: the
// deepest first, so that setting a directory's mtime or a read-only mode
// comes after everything inside it is done.
func deeperFirst(a, b *model.Entry) int {
	if d := depth(b.Path) - depth(a.Path); d != 0 {
		return d
	}
	return strings.Compare(a.Path, b.Path)
}

func byLink(a, b *model.Entry) int { return strings.Compare(a.Link, b.Link) }

func (d *Deferred) init() {
	if d.dirs == nil {
		d.dirs = spill.New(d.Dir, d.Mem, deeperFirst, model.EntryCodec{})
		d.symlinks = spill.New[model.Entry](d.Dir, d.Mem, nil, model.EntryCodec{})
		d.hardlinks = spill.New(d.Dir, d.Mem, byLink, model.EntryCodec{})
	}
}

// Add files an entry under its kind. A failure to spill to disk is kept
// and returned by Err (and fails Pool.Run).
func (d *Deferred) Add(e model.Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	var err error
	switch e.Kind {
	case model.KindDir:
		err = d.dirs.Add(e)
	case model.KindSymlink, model.KindCharDevice, model.KindBlockDevice, model.KindFIFO, model.KindSocket:
		err = d.symlinks.Add(e) // made as symlinks are: nothing inside them
	case model.KindHardlink:
		err = d.hardlinks.Add(e)
	}
	if err != nil && d.err == nil {
		d.err = err
	}
}

// Err is the first failure to spill an entry to disk.
func (d *Deferred) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Len counts the entries of each kind.
func (d *Deferred) Len() (dirs, symlinks, hardlinks int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	return d.dirs.Len(), d.symlinks.Len(), d.hardlinks.Len()
}

// lists returns the three lists, once the walk is over.
func (d *Deferred) lists() (dirs, symlinks, hardlinks *spill.List[model.Entry], err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	return d.dirs, d.symlinks, d.hardlinks, d.err
}

// Close releases the spill files.
func (d *Deferred) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirs == nil {
		return nil
	}
	return errors.Join(d.dirs.Close(), d.symlinks.Close(), d.hardlinks.Close())
}

// ownedCodec encodes an owned record: stream, epoch, entry.
type ownedCodec struct{}

func (ownedCodec) Append(b []byte, o *owned) []byte {
	b = binary.AppendUvarint(b, uint64(o.stream))
	b = binary.AppendUvarint(b, uint64(o.epoch))
	return model.AppendEntry(b, &o.entry)
}

func (ownedCodec) Decode(b []byte) (owned, error) {
	var o owned
	s, n := binary.Uvarint(b)
	if n <= 0 {
		return o, errors.New("short owner record")
	}
	b = b[n:]
	ep, n := binary.Uvarint(b)
	if n <= 0 {
		return o, errors.New("short owner record")
	}
	o.stream, o.epoch = int(s), int(ep)
	e, rest, err := model.ReadEntry(b[n:])
	if err == nil && len(rest) > 0 {
		err = errors.New("trailing bytes after an owner record")
	}
	o.entry = e
	return o, err
}

func byTarget(a, b *owned) int { return strings.Compare(a.entry.Path, b.entry.Path) }
