package sharder

import (
	"path/filepath"

	"github.com/bulkmove/bulkmove/model"
)

// Restat looks the regular file e (relative to root) up again and returns
// it with its current size, mtime, mode and owner; ok is false if it is
// gone or no longer a regular file.
func Restat(root string, e model.Entry) (model.Entry, bool) {
	st, err := lstatPath(filepath.Join(root, filepath.FromSlash(e.Path)))
	if err != nil || st.typ != 0 {
		return e, false
	}
	e.Size, e.MTime, e.Mode, e.UID, e.GID, e.Nlink = st.size, st.mtime, st.perm, st.uid, st.gid, uint32(st.nlink)
	e.Dev, e.Ino, e.CTime = st.dev, st.ino, st.ctime
	return e, true
}
