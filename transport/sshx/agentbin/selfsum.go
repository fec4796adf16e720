package agentbin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// SelfSum is Sum of this executable, once a process, and kept across runs
// in the user's cache (selfSumRecord) for as long as the file is the same
// (device, inode, size, mtime and, where the system has it, ctime): every
// run over SSH needs it for Command, and hashing some 20 MB cost a copy of
// many small files a few per cent of its sender's CPU time. A
// remote-to-remote move starts bulkmove on two hosts at once.
var SelfSum = sync.OnceValues(func() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return cachedSum(self, selfSumRecord())
})

// selfSumRecord is where SelfSum keeps its record: beside the binaries
// Ensure caches when this host is a remote ($XDG_CACHE_HOME or ~/.cache,
// then bulkmove/), or "" (no record) where there is no such directory.
func selfSumRecord() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "bulkmove", ".self.sha256")
}

// cachedSum is Sum of p, taken from the record at rec while it names p's
// present identity, else hashed and recorded there. Nothing that goes
// wrong with the record is an error: the hash is the fallback, and one
// that the file changed under is not recorded.
func cachedSum(p, rec string) (string, error) {
	key, err := fileKey(p)
	if err != nil || rec == "" {
		return Sum(p)
	}
	if b, ok := readPrivate(rec); ok {
		if k, sum, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), " sha256="); ok && k == key && isHexSum(sum) {
			return sum, nil
		}
	}
	sum, err := Sum(p)
	if err != nil {
		return "", err
	}
	if again, err := fileKey(p); err == nil && again == key {
		writeRecord(rec, key+" sha256="+sum+"\n")
	}
	return sum, nil
}

// fileKey is p's identity: what changes when the file is replaced or
// written to.
func fileKey(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	dev, ino, ctime := statIDs(fi)
	return fmt.Sprintf("path=%q dev=%d ino=%d size=%d mtime=%d ctime=%d", p, dev, ino, fi.Size(), fi.ModTime().UnixNano(), ctime), nil
}

// readPrivate reads the record rec if it is a regular file (not through a
// symbolic link) of this user's that no one else may write: the hash it
// holds decides which cached upload a remote runs.
func readPrivate(rec string) ([]byte, bool) {
	f, err := os.OpenFile(rec, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 || !ownedBySelf(fi) || fi.Size() > 4096 {
		return nil, false
	}
	b, err := io.ReadAll(f)
	return b, err == nil
}

func isHexSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// writeRecord writes rec whole (a temporary renamed over it), readable by
// this user alone, in a directory made 0700 if missing; it gives up
// quietly.
func writeRecord(rec, s string) {
	dir := filepath.Dir(rec)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".self.sha256.tmp.")
	if err != nil {
		return
	}
	_, werr := f.WriteString(s)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), rec) != nil {
		os.Remove(f.Name())
	}
}
