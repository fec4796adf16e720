//go:build !linux

package sharder

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// rawStat is what the walk needs from lstat.
//
// This portable fallback fills what os.FileInfo offers, and the owners,
// device, inode and link count where it is a syscall.Stat_t.
type rawStat struct {
	typ   fs.FileMode
	perm  fs.FileMode
	nlink uint64
	uid   uint32
	gid   uint32
	size  int64
	mtime int64
	ctime int64 // unknown here, 0
	dev   uint64
	ino   uint64
	rdev  uint64 // a device's number (model.Mkdev): unknown here, 0
}

// sparse reports whether the file has holes: unknown here, so never.
func (r *rawStat) sparse() bool { return false }

func fromFileInfo(fi fs.FileInfo) rawStat {
	m := fi.Mode()
	r := rawStat{
		typ:   m.Type(),
		perm:  m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky),
		nlink: 1,
		size:  fi.Size(),
		mtime: fi.ModTime().UnixNano(),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		// The BSDs' stat: owners, and the device and inode that find
		// hard links.
		r.nlink, r.uid, r.gid = uint64(st.Nlink), st.Uid, st.Gid
		r.dev, r.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return r
}

func lstatPath(name string) (rawStat, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return rawStat{}, err
	}
	return fromFileInfo(fi), nil
}

type dirHandle struct {
	path string
}

func withDir(f *os.File, dir string, fn func(d dirHandle)) error {
	fn(dirHandle{path: dir})
	return nil
}

func (d dirHandle) lstat(name string) (rawStat, error) {
	return lstatPath(joinPath(d.path, name))
}

func (d dirHandle) stat(name string) (rawStat, error) {
	p := joinPath(d.path, name)
	fi, err := os.Stat(p)
	if err != nil {
		return rawStat{}, noReferent(p, err)
	}
	return fromFileInfo(fi), nil
}

func (d dirHandle) readlink(name string, sizeHint int64) (string, error) {
	return os.Readlink(joinPath(d.path, name))
}

func openDir(name string, follow bool) (*os.File, error) {
	return os.Open(name)
}

// openUnder opens the directory rel (slash-separated) under rootPath.
func openUnder(_ *os.File, rootPath, rel string) (*os.File, error) {
	return os.Open(joinPath(rootPath, filepath.FromSlash(rel)))
}

// dirReader reads a directory's names through (*os.File).ReadDir.
type dirReader struct{ ents []dirent }

func (r *dirReader) read(f *os.File, n int) ([]dirent, error) {
	des, err := f.ReadDir(n)
	r.ents = r.ents[:0]
	for _, de := range des {
		r.ents = append(r.ents, dirent{name: []byte(de.Name()), dir: de.IsDir()})
	}
	return r.ents, err
}

func (r *dirReader) close() {}
