package extract

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
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/sharder"
)

// Removed is one entry Prune deleted (or, in a dry run, would delete).
type Removed struct {
	Path  string
	IsDir bool
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
// must be a real directory under the root, not a symlink to one; nothing
// outside the root is ever reached. It returns what it removed, in name
// order (a directory after what it held), and the first error (the rest
// of the directory is still tried). See PruneEach, which does not gather
// what it removed.
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
//
// The destination directory is read whole first, its names sorted (in
// sorted runs on disk past PruneMem), then merged with keep's: memory does
// not grow with the directory.
func (r *Receiver) PruneEach(dir string, keep *Keep, protect PruneFunc, dryRun bool, report func(Removed) error) error {
	if err := CheckName(dir, sharder.KindDir); err != nil {
		return fmt.Errorf("delete in %q: %w", dir, err)
	}
	if keep != nil && keep.l.Err() != nil {
		return fmt.Errorf("delete in %s: the source's names: %w", dir, keep.l.Err())
	}
	names, err := r.list(dir, true)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // nothing there to prune
		}
		return fmt.Errorf("delete in %s: %w", dir, err)
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
	pr := &pruning{r: r, protect: protect, dryRun: dryRun, report: report}
	var first error
	for de, err := range names.All() {
		if err != nil {
			return fmt.Errorf("delete in %s: %w", dir, err)
		}
		in, err := inKeep(de.name)
		if err != nil {
			return err
		}
		if in {
			continue
		}
		_, err = pr.entry(join(dir, de.name), de.typ)
		if pr.stopped != nil {
			return pr.stopped
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pruning is one PruneEach under way.
type pruning struct {
	r       *Receiver
	protect PruneFunc
	dryRun  bool
	report  func(Removed) error
	stopped error // report's error: nothing more is done
}

func (pr *pruning) removed(rm Removed) {
	if err := pr.report(rm); err != nil && pr.stopped == nil {
		pr.stopped = err
	}
}

// entry deletes p, of type typ, unless protected; a directory goes whole,
// except for protected entries below it (and the directories that hold
// them). gone says whether p itself went.
func (pr *pruning) entry(p string, typ fs.FileMode) (gone bool, err error) {
	r := pr.r
	isDir := typ&fs.ModeDir != 0
	if pr.stopped != nil || (pr.protect != nil && pr.protect(p, isDir)) {
		return false, nil
	}
	if !isDir {
		if !pr.dryRun {
			if err := r.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, fmt.Errorf("delete %s: %w", p, unwrapPath(err))
			}
		}
		pr.removed(Removed{Path: p})
		return true, nil
	}
	if pr.protect == nil {
		if !pr.dryRun {
			if err := r.root.RemoveAll(p); err != nil {
				return false, fmt.Errorf("delete %s: %w", p, unwrapPath(err))
			}
		}
		pr.removed(Removed{Path: p, IsDir: true})
		return true, nil
	}
	// Some entries below may be protected: go down.
	names, err := r.list(p, false)
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", p, err)
	}
	defer names.Close()
	var first error
	kept := false
	for de, err := range names.All() {
		if err != nil {
			return false, fmt.Errorf("delete %s: %w", p, err)
		}
		gone, err := pr.entry(join(p, de.name), de.typ)
		if err != nil && first == nil {
			first = err
		}
		if !gone {
			kept = true // protected, or partly so
		}
		if pr.stopped != nil {
			return false, nil
		}
	}
	if kept || first != nil {
		return false, first
	}
	if !pr.dryRun {
		if err := r.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("delete %s: %w", p, unwrapPath(err))
		}
	}
	pr.removed(Removed{Path: p, IsDir: true})
	return true, nil
}

// dirent is a name a directory holds and its type.
type dirent struct {
	name string
	typ  fs.FileMode
}

// list reads a directory under the root without following a symlink at
// its last component, whole, before anything in it is deleted: into a
// list sorted by name if sorted, else in the order read, which holds
// PruneMem names in memory and spills the rest to disk.
func (r *Receiver) list(dir string, sorted bool) (*spill.List[dirent], error) {
	// os.Root follows symlinks that stay inside it: make sure that what
	// is opened is the directory itself, not where a link points.
	lfi, err := r.root.Lstat(dir)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !lfi.IsDir() {
		return nil, fmt.Errorf("not a directory (%s)", lfi.Mode().Type())
	}
	f, err := r.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !os.SameFile(fi, lfi) {
		return nil, errors.New("replaced while being opened")
	}
	// A file opened through an os.Root lstats every entry ReadDir returns;
	// a plain descriptor of the same directory gives the types from
	// getdents alone (one system call per 1024 names, not one per name).
	nfd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	f = os.NewFile(uintptr(nfd), dir)
	defer f.Close()
	var cmp func(a, b *dirent) int
	if sorted {
		cmp = func(a, b *dirent) int { return strings.Compare(a.name, b.name) }
	}
	all := spill.New("", PruneMem, cmp, direntCodec{})
	for {
		des, err := f.ReadDir(1024)
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
