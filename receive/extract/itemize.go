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
	return r.attrItemsOf(dirAttrs{st.Mtim.Nano(), st.Mode & 0o7777, st.Uid, st.Gid}, e)
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
	if unix.Fstat(fd, &st) != nil {
		return
	}
	r.mu.Lock()
	if _, ok := r.orig[d]; !ok {
		if r.orig == nil {
			r.orig = map[string]dirAttrs{}
		}
		r.orig[d] = dirAttrs{st.Mtim.Nano(), st.Mode & 0o7777, st.Uid, st.Gid}
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
		if unix.Fstat(fd, &st) != nil {
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
func (t *Txn) ackItems() []wire.Item {
	var out []wire.Item
	for i, f := range t.items {
		if f != 0 {
			out = append(out, wire.Item{Index: i, Flags: f})
		}
	}
	return out
}
