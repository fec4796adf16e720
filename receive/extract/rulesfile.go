package extract

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/model"
)

// ReadRulesFile reads the per-directory filter file name (a dir-merge
// rule's) in the directory dir of DEST, for --delete's protection: opened
// through the root with no symlink followed on the way or at its end (a
// file a local user links elsewhere is refused, not read), and no larger
// than filter.MaxRulesFile. A name that is not there is an error matching
// fs.ErrNotExist.
func (r *Receiver) ReadRulesFile(dir, name string) ([]byte, error) {
	if err := CheckName(dir, model.KindDir); err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := CheckName(name, model.KindFile); err != nil || strings.Contains(name, "/") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a file name")}
	}
	d, err := r.openNoLinks(dir)
	if err != nil {
		var iw *inWayError
		if errors.As(err, &iw) {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
		}
		return nil, err
	}
	defer d.Close()
	p := name
	if dir != "." {
		p = dir + "/" + name
	}
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errors.New("not a regular file")}
	}
	return filter.ReadLimited(f, p)
}
