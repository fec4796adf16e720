package source

import (
	"github.com/bulkmove/bulkmove/internal/idmap"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// OwnerNames returns this side's names of the users and groups that own
// entries, one each, for the receiver's --usermap and --groupmap rules
// that match names and for --no-numeric-ids; nil without Owners. An id
// without a name is left out: the receiver takes it as nameless.
func (s Source) OwnerNames(entries []model.Entry) []wire.IDName {
	if s.Owners == nil {
		return nil
	}
	var out []wire.IDName
	seen := map[wire.IDName]bool{}
	for i := range entries {
		e := &entries[i]
		if e.Kind == model.KindHardlink {
			continue // owned as its target
		}
		for _, k := range []wire.IDName{{ID: e.UID}, {Group: true, ID: e.GID}} {
			if seen[k] {
				continue
			}
			seen[k] = true
			if k.Group {
				k.Name = s.Owners.Group(k.ID)
			} else {
				k.Name = s.Owners.User(k.ID)
			}
			if idmap.ValidName(k.Name) {
				out = append(out, k)
			}
		}
	}
	return out
}
