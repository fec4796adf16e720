package extract

// Deleting what the source lacks (--delete): Prune, PruneDir and
// PruneNames remove the extra entries of a destination directory, by name
// in a directory descriptor, with no symlink followed, in memory bounded
// whatever the size of the directory.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/model"
)

// Removed is one entry Prune deleted (or, in a dry run, would delete).
// Top says it is an entry of the directory pruned itself, not one inside
// a directory that goes; Type is its type as listed.
type Removed struct {
	Path  string
	IsDir bool
	Top   bool
	Type  fs.FileMode
	// Backup: moved aside (Options.Backup, see backup.go), not deleted.
	Backup bool
}

// PruneFunc decides whether an extra entry at the destination is kept
// although the source does not have it (the filter rules' protection).
type PruneFunc func(path string, isDir bool) (protected bool)

// Keep is the names a source directory holds, as Prune takes them: any
// number of them, added in any order and in as many parts as they come.
// Up to PruneMem names are held in memory, the rest in sorted runs in an
// unlinked temporary file in $TMPDIR, so a flat directory of tens of
// millions of names costs a bounded amount of memory.
type Keep struct {
	l *spill.List[string]
}

// PruneMem is how many names Prune and Keep hold in memory at once (a
// source directory's, and a destination directory's), each; a larger
// directory spills to disk.
var PruneMem = spill.DefaultMem

// NewKeep returns a Keep holding names.
func NewKeep(names ...string) *Keep {
	k := &Keep{l: spill.New("", PruneMem, func(a, b *string) int { return strings.Compare(*a, *b) }, spill.StringCodec{})}
	k.Add(names...)
	return k
}

// Add adds names. A failure to write them to disk sticks: Prune then
// fails and deletes nothing.
func (k *Keep) Add(names ...string) error {
	for _, n := range names {
		if err := k.l.Add(n); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	return nil
}

// Len is how many names were added.
func (k *Keep) Len() int64 { return k.l.Len() }

// Spilled reports whether some of the names went to disk.
func (k *Keep) Spilled() bool { return k.l.Spilled() }

// Close releases the temporary file. A nil Keep does nothing.
func (k *Keep) Close() error {
	if k == nil {
		return nil
	}
	return k.l.Close()
}

// Prune deletes what the directory dir holds beyond the names in keep (the
// source's entries of that directory; nil: none): files, symlinks (as
// links, never followed) and whole directories, but not entries protect
// says to keep, nor anything under them. In a dry run it only reports. dir
// must be a real directory under the root, reached with no symlink on the
// way; nothing outside it is ever reached. It returns what it removed, in
// name order (a directory after what it held), and the first error (the
// rest of the directory is still tried). See PruneEach, which does not
// gather what it removed.
func (r *Receiver) Prune(dir string, keep *Keep, protect PruneFunc, dryRun bool) ([]Removed, error) {
	var out []Removed
	err := r.PruneEach(dir, keep, protect, dryRun, func(rm Removed) error {
		out = append(out, rm)
		return nil
	})
	return out, err
}

// PruneEach is Prune that hands report each entry as it is removed,
// rather than gathering them: memory does not grow with what goes. An
// error from report stops it at once, and it returns that error.
func (r *Receiver) PruneEach(dir string, keep *Keep, protect PruneFunc, dryRun bool, report func(Removed) error) error {
	_, err := r.PruneDir(dir, keep, PruneOptions{Protect: protect, DryRun: dryRun}, report)
	return err
}

// PruneOptions are how PruneDir prunes.
type PruneOptions struct {
	Protect PruneFunc // nil: nothing protected
	DryRun  bool      // remove nothing; report what would go
	// Limit, if above 0, is the most entries removed (--max-delete):
	// past it nothing more goes, and what would have is counted in
	// PruneCount.Held.
	Limit int64
}

// PruneCount is what one PruneDir looked at and did. Every entry counts
// once, those inside a removed directory too; protected entries do not
// count.
type PruneCount struct {
	Examined int64 // entries of the destination looked at
	Removed  int64 // removed (in a dry run: that would be)
	Held     int64 // that would have gone but for the limit
}

// PruneDir is PruneEach with options, and the counts the --delete guard
// and --max-delete go by.
//
// The directory is opened beneath the root with no symlink followed on
// the way (openNoLinks), read whole through that descriptor (its names
// sorted, in sorted runs on disk past PruneMem, then merged with keep's:
// memory does not grow with the directory), and each entry is removed by
// name in that descriptor; a directory to remove is opened from it with
// O_NOFOLLOW, emptied the same way and removed by name. No path is looked
// up again: a directory of the destination swapped for a symlink while a
// prune runs fails with an error naming it, and nothing is deleted
// through the link.
func (r *Receiver) PruneDir(dir string, keep *Keep, o PruneOptions, report func(Removed) error) (PruneCount, error) {
	pr := r.pruning(o, report)
	if err := CheckName(dir, model.KindDir); err != nil {
		return pr.n, fmt.Errorf("delete in %q: %w", dir, err)
	}
	if keep != nil && keep.l.Err() != nil {
		return pr.n, fmt.Errorf("delete in %s: the source's names: %w", dir, keep.l.Err())
	}
	d, err := r.openPruned(dir)
	if d == nil {
		return pr.n, err
	}
	defer d.Close()
	if r.inBackupDir(dir, int(d.Fd())) {
		return pr.n, nil // the backups are not SRC's to prune
	}
	names, err := list(d, true)
	if err != nil {
		return pr.n, fmt.Errorf("delete in %s: %w", dir, err)
	}
	defer names.Close()
	var kept func() (string, error, bool)
	have, cur := false, ""
	if keep != nil {
		next, stop := iter.Pull2(keep.l.All())
		defer stop()
		kept = next
	}
	// inKeep reports whether name is in keep; the names asked for come
	// in increasing order, as keep's do.
	inKeep := func(name string) (bool, error) {
		for kept != nil {
			if have && cur >= name {
				return cur == name, nil
			}
			n, err, ok := kept()
			if err != nil {
				return false, fmt.Errorf("delete in %s: the source's names: %w", dir, err)
			}
			if !ok {
				kept = nil
				break
			}
			have, cur = true, n
		}
		return false, nil
	}
	var first error
	for de, err := range names.All() {
		if err != nil {
			return pr.n, fmt.Errorf("delete in %s: %w", dir, err)
		}
		in, err := inKeep(de.name)
		if err != nil {
			return pr.n, err
		}
		if in {
			pr.n.Examined++
			continue
		}
		_, err = pr.entry(d, join(dir, de.name), de.name, de.typ)
		if pr.stopped != nil {
			return pr.n, pr.stopped
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return pr.n, first
}

// Candidate is an entry of a destination directory that a count found
// to go (Removed with Top), named again to PruneNames.
type Candidate struct {
	Name string
	Type fs.FileMode // as listed: fs.ModeDir, fs.ModeSymlink, 0 for a file...
}

// openPruned opens the directory dir to prune in, beneath the root with
// no symlink followed: nil and no error if there is none to prune in
// (gone, or no longer a directory).
func (r *Receiver) openPruned(dir string) (*os.File, error) {
	if r.missing {
		return nil, nil // a dry run's DEST that is not there
	}
	d, err := r.openNoLinks(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || r.typeChanged(dir, err) {
			return nil, nil // nothing there to prune
		}
		return nil, fmt.Errorf("delete in %s: %w", dir, err)
	}
	return d, nil
}

// PruneNames removes, from the directory dir, the entries names that a
// count (PruneDir in a dry run) found to go, without listing dir again:
// the deleting pass of a guarded --delete costs what it deletes, not the
// size of the destination. Each entry is looked at again in dir's
// descriptor (opened as PruneDir opens it, no symlink followed): one
// that is gone, or whose type is not the one listed (a file that became
// a directory, a directory swapped for a symlink), is left alone; what
// protect keeps stays; the rest goes as PruneDir removes it, a directory
// with what it now holds. Counts and errors are as PruneDir's.
func (r *Receiver) PruneNames(dir string, names []Candidate, o PruneOptions, report func(Removed) error) (PruneCount, error) {
	pr := r.pruning(o, report)
	if err := CheckName(dir, model.KindDir); err != nil {
		return pr.n, fmt.Errorf("delete in %q: %w", dir, err)
	}
	d, err := r.openPruned(dir)
	if d == nil {
		return pr.n, err
	}
	defer d.Close()
	if r.inBackupDir(dir, int(d.Fd())) {
		return pr.n, nil // the backups are not SRC's to prune
	}
	var first error
	for _, c := range names {
		p := join(dir, c.Name)
		if c.Name == "" || c.Name == "." || c.Name == ".." || strings.ContainsRune(c.Name, '/') {
			return pr.n, fmt.Errorf("delete in %s: %q is not a name", dir, c.Name)
		}
		var st unix.Stat_t
		switch err := unix.Fstatat(int(d.Fd()), c.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err {
		case nil:
		case unix.ENOENT:
			continue // gone already
		default:
			if first == nil {
				first = fmt.Errorf("delete %s: %w", p, err)
			}
			continue
		}
		typ := unixmode.Type(uint32(st.Mode))
		if !sameKind(typ, c.Type) {
			continue // not what was counted: left alone
		}
		_, err := pr.entry(d, p, c.Name, typ)
		if pr.stopped != nil {
			return pr.n, pr.stopped
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return pr.n, first
}

// sameKind reports whether a and b are both files, both directories,
// both symlinks, or both something else.
func sameKind(a, b fs.FileMode) bool {
	kind := func(m fs.FileMode) fs.FileMode {
		switch t := m.Type(); t {
		case 0, fs.ModeDir, fs.ModeSymlink:
			return t
		}
		return fs.ModeIrregular
	}
	return kind(a) == kind(b)
}

// pruning is a PruneDir (or PruneNames) of r with o, reporting to
// report. With backups, the backup directory, if there, is opened first:
// the prune keeps it (isBackupDir).
func (r *Receiver) pruning(o PruneOptions, report func(Removed) error) *pruning {
	if r.opt.Backup && !r.besides() {
		r.backupRoot(false) // (one it cannot open is kept by path alone, if relative)
	}
	return &pruning{r: r, protect: o.Protect, dryRun: o.DryRun, limit: o.Limit, report: report}
}

// pruning is one PruneDir under way.
type pruning struct {
	r       *Receiver
	protect PruneFunc
	dryRun  bool
	limit   int64
	report  func(Removed) error
	n       PruneCount
	stopped error // report's error: nothing more is done
	depth   int   // of the entry under way below the directory pruned
	// marks are the in-place markers kept so far (keepMarker), by path:
	// a file deleted after its marker was kept takes it along.
	marks map[string]struct{}
}

func (pr *pruning) removed(rm Removed) {
	pr.n.Removed++
	if err := pr.report(rm); err != nil && pr.stopped == nil {
		pr.stopped = err
	}
}

// held reports whether the limit keeps the next entry from going (and
// then counts it).
func (pr *pruning) held() bool {
	if pr.limit > 0 && pr.n.Removed >= pr.limit {
		pr.n.Held++
		return true
	}
	return false
}

// entry deletes the entry name of the directory d (p under the root), of
// type typ as listed, unless protected; a directory goes whole, except
// for protected entries below it (and the directories that hold them).
// gone says whether the entry itself went.
func (pr *pruning) entry(d *os.File, p, name string, typ fs.FileMode) (gone bool, err error) {
	isDir := typ&fs.ModeDir != 0
	if pr.stopped != nil || (pr.protect != nil && pr.protect(p, isDir)) || isDir && pr.r.isBackupDir(p, -1) {
		return false, nil
	}
	if !isDir && strings.HasPrefix(name, InPlacePrefix) && pr.keepMarker(d, p, name) {
		// The marker of a file patched in place and not finished
		// (deltainplace.go): the next pass that finishes it removes it.
		return false, nil
	}
	pr.n.Examined++
	if !isDir {
		if pr.held() {
			return false, nil
		}
		// With --backup the file is moved aside (backup.go); one beside
		// its files keeps its directory. A name that is a backup already
		// (of its suffix, beside its file) goes, as rsync's does.
		r := pr.r
		backup := !pr.dryRun && r.backingUp() && !(r.besides() && strings.HasSuffix(name, r.opt.Suffix))
		if backup {
			if _, err := r.backupAt(int(d.Fd()), name, p, false, nil); err != nil {
				return false, err
			}
		} else if !pr.dryRun {
			if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil && err != unix.ENOENT {
				if err == unix.EISDIR {
					return false, fmt.Errorf("delete %s: became a directory while being deleted", p)
				}
				return false, fmt.Errorf("delete %s: %w", p, err)
			}
			pr.dropMarker(d, p, name)
		}
		pr.removed(Removed{Path: p, Top: pr.depth == 0, Type: typ.Type(), Backup: backup})
		return !(backup && r.besides()), nil
	}
	fd, err := unix.Openat(int(d.Fd()), name, dirFlags, 0)
	switch err {
	case nil:
	case unix.ENOENT:
		return true, nil // gone already
	case unix.ELOOP, unix.ENOTDIR:
		return false, fmt.Errorf("delete %s: %w", p, errSymlinkInWay)
	default:
		return false, fmt.Errorf("delete %s: %w", p, err)
	}
	sub := os.NewFile(uintptr(fd), p)
	defer sub.Close()
	if pr.r.isBackupDir(p, fd) {
		pr.n.Examined--
		return false, nil // an absolute --backup-dir beneath DEST
	}
	names, err := list(sub, false)
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", p, err)
	}
	defer names.Close()
	// What it holds is below the directory pruned: not Top.
	pr.depth++
	kept, first, err := func() (kept bool, first error, err error) {
		defer func() { pr.depth-- }()
		for de, err := range names.All() {
			if err != nil {
				return false, nil, fmt.Errorf("delete %s: %w", p, err)
			}
			gone, err := pr.entry(sub, join(p, de.name), de.name, de.typ)
			if err != nil && first == nil {
				first = err
			}
			if !gone {
				kept = true // protected, held, or partly so
			}
			if pr.stopped != nil {
				return true, nil, nil
			}
		}
		return kept, first, nil
	}()
	if err != nil {
		return false, err
	}
	if kept || first != nil {
		return false, first
	}
	if pr.held() {
		return false, nil
	}
	if !pr.dryRun {
		switch err := unix.Unlinkat(int(d.Fd()), name, unix.AT_REMOVEDIR); err {
		case nil, unix.ENOENT:
		case unix.ENOTDIR:
			return false, fmt.Errorf("delete %s: %w", p, errSymlinkInWay)
		case unix.ENOTEMPTY, unix.EEXIST:
			return false, fmt.Errorf("delete %s: entries were added while it was being deleted", p)
		default:
			return false, fmt.Errorf("delete %s: %w", p, err)
		}
	}
	pr.removed(Removed{Path: p, IsDir: true, Top: pr.depth == 0, Type: fs.ModeDir})
	return true, nil
}

// errSymlinkInWay is what meeting a symlink (or anything but a
// directory) where a prune goes down says: it is not followed.
var errSymlinkInWay = errors.New("a symlink (or something other than a directory) is in the way, perhaps swapped in during the pass: not followed")

// inWayError is errSymlinkInWay met at the path at under the root ("":
// not known where).
type inWayError struct{ at string }

func (e *inWayError) Error() string { return errSymlinkInWay.Error() }
func (e *inWayError) Unwrap() error { return errSymlinkInWay }

// openNoLinks opens the directory p under the root with no symlink
// followed on the way, not even one that stays beneath the root (a link
// from one directory of the destination to another would have a prune
// delete the other's entries): openDir, with errSymlinkInWay where it
// meets something other than a directory.
func (r *Receiver) openNoLinks(p string) (*os.File, error) {
	f, err := r.openDir(p, 0)
	var nd *notDirError
	if errors.As(err, &nd) {
		return nil, &inWayError{at: nd.at}
	}
	if err != nil {
		return nil, unwrapPath(err)
	}
	return f, nil
}

// dirent is a name a directory holds and its type.
type dirent struct {
	name string
	typ  fs.FileMode
}

// list reads the open directory d whole, before anything in it is
// deleted: into a list sorted by name if sorted, else in the order read,
// which holds PruneMem names in memory and spills the rest to disk. d,
// opened as a plain descriptor, gives the types from getdents alone (one
// system call per 1024 names, not one per name).
func list(d *os.File, sorted bool) (*spill.List[dirent], error) {
	var cmp func(a, b *dirent) int
	if sorted {
		cmp = func(a, b *dirent) int { return strings.Compare(a.name, b.name) }
	}
	all := spill.New("", PruneMem, cmp, direntCodec{})
	for {
		des, err := d.ReadDir(1024)
		for _, de := range des {
			if aerr := all.Add(dirent{name: de.Name(), typ: de.Type()}); aerr != nil {
				all.Close()
				return nil, aerr
			}
		}
		if err == io.EOF || (err == nil && len(des) == 0) {
			return all, nil
		}
		if err != nil {
			all.Close()
			return nil, unwrapPath(err)
		}
	}
}

// direntCodec stores a dirent as its type bits (a uvarint) and its name.
type direntCodec struct{}

func (direntCodec) Append(b []byte, d *dirent) []byte {
	b = binary.AppendUvarint(b, uint64(d.typ))
	return append(b, d.name...)
}

func (direntCodec) Decode(b []byte) (dirent, error) {
	t, n := binary.Uvarint(b)
	if n <= 0 {
		return dirent{}, errors.New("short directory entry")
	}
	return dirent{name: string(b[n:]), typ: fs.FileMode(t)}, nil
}

func join(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return path.Join(dir, name)
}
