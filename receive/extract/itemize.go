package extract

import (
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Itemizing (Options.Itemize, the sender's -i): what the receiver found
// changed of each entry, as rsync's -i reports it, in the batch's ack
// (wire.BatchAck.Items). A file's item comes from the quick check (Need),
// which looks at what DEST has before anything is written; a directory's
// and a symlink's from their applying. A directory this job writes into
// has its mtime changed by that: what it was before is what counts, kept
// from the first time the job opened it to write (origDir).

// dirAttrs is what a directory of DEST had before this job changed it.
type dirAttrs struct {
	mtime    int64
	mode     uint32
	uid, gid uint32
}

// attrItems is the item flags of what differs between st, as DEST has
// it, and e: mtime, permission bits, and (where owners are kept) owner
// and group.
func (r *Receiver) attrItems(st *unix.Stat_t, e *model.Entry) uint16 {
	return r.attrItemsOf(dirAttrs{st.Mtim.Nano(), uint32(st.Mode) & 0o7777, st.Uid, st.Gid}, e)
}

func (r *Receiver) attrItemsOf(a dirAttrs, e *model.Entry) uint16 {
	var f uint16
	if a.mtime != e.MTime {
		f |= wire.ItemTime
	}
	if a.mode != r.opt.mode(e.Mode) {
		f |= wire.ItemPerms
	}
	if r.opt.Owner && a.uid != e.UID {
		f |= wire.ItemOwner
	}
	if r.opt.Owner && a.gid != e.GID {
		f |= wire.ItemGroup
	}
	return f
}

// origDir records directory d's attributes, open as fd, unless recorded
// already: called before the job first changes it. Only when itemizing.
func (r *Receiver) origDir(d string, fd int) {
	if !r.opt.Itemize {
		return
	}
	r.mu.Lock()
	_, ok := r.orig[d]
	r.mu.Unlock()
	if ok {
		return
	}
	var st unix.Stat_t
	if r.fstat(fd, &st) != nil {
		return
	}
	r.mu.Lock()
	if _, ok := r.orig[d]; !ok {
		if r.orig == nil {
			r.orig = map[string]dirAttrs{}
		}
		r.orig[d] = dirAttrs{st.Mtim.Nano(), uint32(st.Mode) & 0o7777, st.Uid, st.Gid}
	}
	r.mu.Unlock()
}

// dirItems is the item of directory entry e, open as fd: new if this
// receiver made it, else what differed from e before the job changed it.
func (r *Receiver) dirItems(e *model.Entry, fd int) uint16 {
	if e.Path == "." && r.rootMade || e.Path != "." && r.made(e.Path) {
		return wire.ItemNew
	}
	r.mu.Lock()
	a, ok := r.orig[e.Path]
	r.mu.Unlock()
	if !ok {
		var st unix.Stat_t
		if r.fstat(fd, &st) != nil {
			return 0
		}
		return r.attrItems(&st, e)
	}
	return r.attrItemsOf(a, e)
}

// item adds flags to entry i's item; a no-op unless itemizing. Entries
// are applied each by one goroutine, so no lock.
func (t *Txn) item(i int, flags uint16) {
	if t.items != nil && flags != 0 {
		t.items[i] |= flags
	}
}

// SetItems adds the items the quick check found (NeedItems) to the
// batch's.
func (t *Txn) SetItems(items []uint16) {
	for i, f := range items {
		t.item(i, f)
	}
}

// ackItems lists the batch's items for its ack.
func (t *Txn) ackItems() []wire.Item { return itemList(t.items) }

// itemList lists the entries of items that are not 0.
func itemList(items []uint16) []wire.Item {
	var out []wire.Item
	for i, f := range items {
		if f != 0 {
			out = append(out, wire.Item{Index: i, Flags: f})
		}
	}
	return out
}

// Would is what a move of entries would change at the destination, as
// its acks' items would say (-i with --dry-run), writing nothing: for a
// file the quick check's comparison, without setting right the
// attributes of one up to date; for a directory or a symlink what its
// applying would find. Hard links are not itemized, as in a move.
func (r *Receiver) Would(entries []model.Entry, sums []wire.Sum) []wire.Item {
	items := make([]uint16, len(entries))
	r.examine(entries, sums, func(i, dfd int, base string, sum wire.Sum, buf []byte) {
		items[i] = r.wouldOne(&entries[i], dfd, base, sum, buf)
	})
	return itemList(items)
}

// newItem is the item of an entry of kind k not at the destination: a
// file's data is sent. Hard links are not itemized.
func newItem(k model.Kind) uint16 {
	switch k {
	case model.KindFile:
		return wire.ItemNew | wire.ItemSent
	case model.KindHardlink:
		return 0
	}
	return wire.ItemNew
}

// wouldOne is Would for entry e, in the directory dfd (-1: not there)
// as base.
func (r *Receiver) wouldOne(e *model.Entry, dfd int, base string, sum wire.Sum, buf []byte) uint16 {
	if CheckName(e.Path, e.Kind) != nil || e.Kind == model.KindHardlink {
		return 0 // a move refuses it, or does not itemize it
	}
	if e.Kind.IsDevice() || e.Kind.IsSpecial() {
		if _, err := r.opt.mayMake(e); err != nil {
			return 0 // a move refuses it
		}
	}
	var st unix.Stat_t
	if dfd < 0 || e.Path == "." && r.rootMade || r.lstatAt(dfd, base, &st) != nil {
		if r.opt.Existing && e.Path != "." {
			return 0 // --existing makes nothing
		}
		return newItem(e.Kind)
	}
	mode := r.opt.check()
	if mode == wire.CheckNone && e.Resumed {
		mode = wire.CheckQuick // as Need takes it
	}
	typ := uint32(st.Mode) & unix.S_IFMT
	switch e.Kind {
	case model.KindDir:
		if typ != unix.S_IFDIR {
			return wire.ItemNew
		}
		return r.attrItems(&st, e)
	case model.KindSymlink:
		switch {
		case typ != unix.S_IFLNK:
			return wire.ItemNew
		case mode == wire.CheckExisting:
			return 0
		}
		var f uint16
		if st.Mtim.Nano() != e.MTime {
			f |= wire.ItemTime
		}
		if cur, err := r.readlinkAt(dfd, base); err != nil || cur != e.Link {
			f |= wire.ItemContent
		}
		return f
	case model.KindFile:
		switch {
		case typ != unix.S_IFREG:
			return newItem(e.Kind)
		case mode == wire.CheckExisting, r.opt.Update && newerAtDest(&st, e):
			return 0 // (-u: newer at DEST, left as it is)
		case mode == wire.CheckNone:
			return wire.ItemSent
		}
		f := r.attrItems(&st, e)
		sent := st.Size != e.Size
		if sent {
			f |= wire.ItemSize
		}
		switch mode {
		case wire.CheckQuick:
			sent = sent || st.Mtim.Nano() != e.MTime
		case wire.CheckSum:
			if !sent {
				got, err := sumAt(dfd, base, buf)
				if sent = err != nil || sum == (wire.Sum{}) || got != sum; sent {
					f |= wire.ItemContent
				}
			}
		}
		if sent {
			f |= wire.ItemSent
		}
		return f
	case model.KindCharDevice, model.KindBlockDevice, model.KindFIFO, model.KindSocket:
		// As applySpecial finds it.
		switch {
		case typ != nodeType(e.Kind):
			return wire.ItemNew
		case mode == wire.CheckExisting:
			return 0
		case sameNode(&st, e):
			return r.attrItems(&st, e)
		}
		return wire.ItemContent | r.attrItems(&st, e) // a device of another number
	}
	return 0
}
