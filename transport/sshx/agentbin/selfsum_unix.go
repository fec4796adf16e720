//go:build unix

package agentbin

import (
	"io/fs"
	"os"
	"syscall"
)

// statIDs are fi's device, inode and ctime (nanoseconds), or zeros.
func statIDs(fi fs.FileInfo) (dev, ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(st.Dev), uint64(st.Ino), ctimeOf(st)
}

// ownedBySelf says whether fi is owned by this process's effective user.
func ownedBySelf(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
