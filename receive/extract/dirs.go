package extract

// Target directories: each is opened (and made, with its missing
// parents) once a batch (Txn.dir, makeDir), and the receiver remembers
// which ones it made itself (made): one made by this receiver was empty
// then, so a new file may go in under its own name (createInPlace, in
// write.go), and the quick check need not look up a file it did not place
// there since (land, placed).

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
)

// txnDir is a target directory of a batch, opened (and created) once by
// whichever writer needs it first; the others wait for it.
type txnDir struct {
	once sync.Once
	f    *os.File
	err  error
	// sys makes the calls on the files created in it: quick on the
	// receiver's memory filesystem (not on another mounted under it).
	sys dirat.Calls
}

// dir opens (and creates) the parent directory of p, once per batch.
func (t *Txn) dir(p string) (*os.File, string, error) {
	td, base := t.txnDir(p)
	return td.f, base, td.err
}

// txnDir is dir with the Calls for the new files in it.
func (t *Txn) txnDir(p string) (*txnDir, string) {
	d, base := splitDir(p)
	t.mu.Lock()
	td, ok := t.dirs[d]
	if !ok {
		td = &txnDir{}
		t.dirs[d] = td
	}
	t.mu.Unlock()
	td.once.Do(func() { td.f, td.sys, td.err = t.openDir(d) })
	return td, base
}

func (t *Txn) openDir(d string) (*os.File, dirat.Calls, error) {
	seen := t.r.seenDir(d)
	f, err := t.r.makeDir(d)
	if wayBlocked(err) && !seen {
		// Not a directory there, or not one reached without a symlink
		// (see inway.go).
		f, err = t.r.openWay(d, t.aside)
	}
	if err != nil {
		return nil, dirat.Calls{}, err
	}
	if t.r.opt.Itemize && !t.r.made(d) {
		t.r.origDir(d, int(f.Fd())) // before this job writes into it
	}
	var st unix.Stat_t
	sys := dirat.Calls{}
	if unix.Fstat(int(f.Fd()), &st) == nil {
		if st.Mode&unix.S_ISGID != 0 {
			t.setgidDir.Store(true)
		}
		sys = dirat.Quick(t.r.memRoot && uint64(st.Dev) == t.r.memDev)
	}
	if t.r.linking() == linkNone && !t.r.made(d) {
		// Named temporaries are only used where O_TMPFILE is not: only
		// there can a killed run have left many behind. (With O_TMPFILE,
		// only the instant of a replace can leave one; --delete removes
		// those.) A directory this receiver made holds none.
		t.r.sweep(d, f)
	}
	return f, sys, nil
}

// makeDir opens directory d under the root (see openDir), first making it
// and each missing parent, one at a time from the top: each is made with
// mkdirat in its parent's descriptor and opened from there, so that a
// parent this receiver made is known to be made (its new files then go in
// under their names: createInPlace).
func (r *Receiver) makeDir(d string) (*os.File, error) {
	r.mu.Lock()
	_, known := r.dirs[d]
	r.mu.Unlock()
	if known || d == "." {
		f, err := r.openDir(d, 0)
		if d == "." || !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
		// Removed since it was made or seen: made again.
	}
	parent, base := splitDir(d)
	pf, err := r.openDir(parent, 0)
	if errors.Is(err, fs.ErrNotExist) && parent != "." {
		pf, err = r.makeDir(parent)
	}
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	pfd := int(pf.Fd())
	// Directories are created owner-writable while the job runs; their
	// real mode is applied by a final batch, after their contents.
	if r.opt.Itemize && !r.made(parent) {
		r.origDir(parent, pfd) // before a directory made in it changes it
	}
	err = unix.Mkdirat(pfd, base, 0o700)
	made := err == nil
	if err != nil && err != unix.EEXIST {
		return nil, &fs.PathError{Op: "mkdir", Path: d, Err: err}
	}
	fd, err := r.openSub(pfd, base, d, 0)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.dirs) > 1<<16 {
		r.forgetDirs()
	}
	// (Another of this receiver's writers may have made it meanwhile, and
	// said so: a lost race to make it does not unmake it.)
	r.dirs[d] = r.dirs[d] || made
	// Its parents were opened on the way, as directories: one of them
	// that is anything else later was swapped in meanwhile (see seenDir).
	// Whoever recorded one recorded its parents too.
	for p := parentOf(d); p != ""; p = parentOf(p) {
		if _, ok := r.dirs[p]; ok {
			break
		}
		r.dirs[p] = false
	}
	r.mu.Unlock()
	return os.NewFile(uintptr(fd), d), nil
}

// mkdirAll is makeDir for a directory not to be opened now.
func (r *Receiver) mkdirAll(d string) error {
	f, err := r.makeDir(d)
	if err == nil {
		f.Close()
	}
	return err
}

// splitDir splits the name p into its directory under the root ("." at
// the top), as openDir takes it, and its last component.
func splitDir(p string) (dir, base string) {
	dir, base = path.Split(p)
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		dir = "."
	}
	return dir, base
}

// parentOf is p's directory as a key: what path.Dir gives, without its
// copy ("" for a name at the top).
func parentOf(p string) string { return p[:max(0, strings.LastIndexByte(p, '/'))] }

// forgetDirs empties the directory cache, under r.mu.
func (r *Receiver) forgetDirs() {
	clear(r.dirs)
	clear(r.landed)
}

// made reports whether this receiver created directory d (so that no
// earlier run can have left anything in it).
func (r *Receiver) made(d string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dirs[d]
}

// maxLanded bounds Receiver.landed (8 bytes of key a file): past it the
// directory cache starts again, and Need looks files up as elsewhere.
const maxLanded = 1 << 20

// land records that the file p, in directory d, is in place.
//
// Only on a slow filesystem (landSlow): elsewhere a lookup costs less than
// remembering every new file (a fresh tree of a million files held 17 MiB
// of these in each agent).
func (r *Receiver) land(d, p string) {
	if !landSlow(r) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dirs[d] {
		return
	}
	if len(r.landed) >= maxLanded {
		r.forgetDirs()
		return
	}
	r.landed[xxh3.HashString(p)] = struct{}{}
}

// landSlow says whether the receiver's filesystem is slow enough (more
// than one operation at once) for Need to skip the lookups of files in
// directories it made, and so for land to record what it placed there. A
// file placed while it was not, and offered again once it is, is sent
// again and replaces itself: more work, never a wrong result.
func landSlow(r *Receiver) bool { return r.io.Width() > 1 }

// placed reports whether land recorded the file p.
func (r *Receiver) placed(p string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.landed[xxh3.HashString(p)]
	return ok
}

// setWriting records (on) or forgets a file written under its final name
// whose batch has not settled (Receiver.writing).
func (r *Receiver) setWriting(p string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !on {
		if r.writing == nil {
			return
		}
		if r.writing[p]--; r.writing[p] <= 0 {
			delete(r.writing, p)
		}
		return
	}
	if r.writing == nil {
		r.writing = map[string]int{}
	}
	r.writing[p]++
}

// isWriting reports whether p is written under its final name by a batch
// not yet settled.
func (r *Receiver) isWriting(p string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writing[p] > 0
}
