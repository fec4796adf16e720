package extract

// Owners mapped and modes changed on the receiving side, as rsync's
// receiver does with the file list it is sent: --usermap, --groupmap and
// --chown (whose TO names this receiver's name service resolves), the
// by-name mapping of --no-numeric-ids, and --chmod. The entries are
// translated once, when they arrive (Translate); everything after
// (the quick check, itemizing, installing, verifying) sees the owners and
// modes this receiver gives them.

import (
	"sync"

	"github.com/bulkmove/bulkmove/internal/idmap"
	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

type translation struct {
	users, groups *idmap.Map // nil: none
	byName        bool
	chmod         unixmode.Chmod
	names         *idmap.Names // this receiver's name service

	mu   sync.Mutex
	done map[idKey]uint32 // each sender's id, mapped once (as rsync's idlist)
}

type idKey struct {
	group bool
	id    uint32
}

// compileTranslation parses the options' maps and --chmod, refusing what
// does not parse or names a user or group this receiver does not know. The
// owners are mapped only where they are kept at all (Owner).
func (r *Receiver) compileTranslation() error {
	o := &r.opt
	t := &translation{byName: o.ByName && o.Owner, done: map[idKey]uint32{}}
	if o.Chmod != "" {
		c, err := unixmode.ParseChmod(o.Chmod, o.ChmodUmask)
		if err != nil {
			return err
		}
		t.chmod = c
	}
	for _, m := range []struct {
		flag, spec string
		dst        **idmap.Map
	}{{"--usermap", o.UserMap, &t.users}, {"--groupmap", o.GroupMap, &t.groups}} {
		if m.spec == "" {
			continue
		}
		// Parsed even where owners are not kept: a sender's bad map is
		// refused wherever it goes.
		p, err := idmap.Parse(m.flag, m.spec)
		if err != nil {
			return err
		}
		if o.Owner {
			*m.dst = p
		}
	}
	if t.users == nil && t.groups == nil && !t.byName && t.chmod == nil {
		return nil
	}
	t.names = idmap.NewNames()
	if t.users != nil {
		if err := t.users.Resolve(t.names.UID); err != nil {
			return err
		}
	}
	if t.groups != nil {
		if err := t.groups.Resolve(t.names.GID); err != nil {
			return err
		}
	}
	r.tr = t
	return nil
}

// Translating reports whether Translate changes entries: a caller that
// shares its entries with the sending side (a local copy) translates a
// copy of them.
func (r *Receiver) Translating() bool { return r.tr != nil }

// Translate changes entries in place to what this receiver installs:
// their owners mapped (names are the sender's names of the owners, from
// the manifest) and their modes changed by --chmod (not a symlink's, as
// rsync). It returns entries.
func (r *Receiver) Translate(entries []model.Entry, names []wire.IDName) []model.Entry {
	t := r.tr
	if t == nil {
		return entries
	}
	mapIDs := t.users != nil || t.groups != nil || t.byName
	for i := range entries {
		e := &entries[i]
		if t.chmod != nil && e.Kind != model.KindSymlink && e.Kind != model.KindHardlink {
			e.Mode = e.Mode.Type() | unixmode.FileMode(t.chmod.Apply(unixmode.Of(e.Mode), e.Kind == model.KindDir))
		}
		if mapIDs {
			e.UID = t.mapID(false, e.UID, names)
			e.GID = t.mapID(true, e.GID, names)
		}
	}
	return entries
}

// mapID is rsync's recv_add_id: the first rule that matches, else by name
// where asked (never id 0), else the id as sent.
func (t *translation) mapID(group bool, id uint32, names []wire.IDName) uint32 {
	k := idKey{group, id}
	t.mu.Lock()
	defer t.mu.Unlock()
	if to, ok := t.done[k]; ok {
		return to
	}
	name := ""
	for _, n := range names {
		if n.Group == group && n.ID == id {
			name = n.Name
			break
		}
	}
	m, lookup := t.users, t.names.UID
	if group {
		m, lookup = t.groups, t.names.GID
	}
	to, hit := m.Match(id, name)
	if !hit && t.byName && name != "" && id != 0 {
		if mine, ok := lookup(name); ok {
			to = mine
		}
	}
	t.done[k] = to
	return to
}
