package extract

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

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

// Prune deletes what the directory dir holds beyond the names in keep (the
// source's entries of that directory): files, symlinks (as links, never
// followed) and whole directories, but not entries protect says to keep,
// nor anything under them. In a dry run it only reports. dir must be a
// real directory under the root, not a symlink to one; nothing outside the
// root is ever reached. It returns what it removed, in order, and the
// first error (the rest of the directory is still tried).
func (r *Receiver) Prune(dir string, keep map[string]bool, protect PruneFunc, dryRun bool) ([]Removed, error) {
	if err := CheckName(dir, sharder.KindDir); err != nil {
		return nil, fmt.Errorf("delete in %q: %w", dir, err)
	}
	names, err := r.list(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // nothing there to prune
		}
		return nil, fmt.Errorf("delete in %s: %w", dir, err)
	}
	var out []Removed
	var first error
	for _, de := range names {
		if keep[de.Name()] {
			continue
		}
		p := join(dir, de.Name())
		removed, err := r.pruneEntry(p, de.Type(), protect, dryRun)
		out = append(out, removed...)
		if err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// pruneEntry deletes p, of type typ, unless protected; a directory goes
// whole, except for protected entries below it (and the directories that
// hold them).
func (r *Receiver) pruneEntry(p string, typ fs.FileMode, protect PruneFunc, dryRun bool) ([]Removed, error) {
	isDir := typ&fs.ModeDir != 0
	if protect != nil && protect(p, isDir) {
		return nil, nil
	}
	if !isDir {
		if !dryRun {
			if err := r.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("delete %s: %w", p, unwrapPath(err))
			}
		}
		return []Removed{{Path: p}}, nil
	}
	if protect == nil {
		if !dryRun {
			if err := r.root.RemoveAll(p); err != nil {
				return nil, fmt.Errorf("delete %s: %w", p, unwrapPath(err))
			}
		}
		return []Removed{{Path: p, IsDir: true}}, nil
	}
	// Some entries below may be protected: go down.
	names, err := r.list(p)
	if err != nil {
		return nil, fmt.Errorf("delete %s: %w", p, err)
	}
	var out []Removed
	var first error
	kept := false
	for _, de := range names {
		rm, err := r.pruneEntry(join(p, de.Name()), de.Type(), protect, dryRun)
		if err != nil && first == nil {
			first = err
		}
		if len(rm) == 0 || rm[len(rm)-1].Path != join(p, de.Name()) {
			kept = true // protected, or partly so
		}
		out = append(out, rm...)
	}
	if kept || first != nil {
		return out, first
	}
	if !dryRun {
		if err := r.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, fmt.Errorf("delete %s: %w", p, unwrapPath(err))
		}
	}
	return append(out, Removed{Path: p, IsDir: true}), nil
}

// list reads a directory under the root without following a symlink at
// its last component.
func (r *Receiver) list(dir string) ([]fs.DirEntry, error) {
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
	var all []fs.DirEntry
	for {
		des, err := f.ReadDir(1024)
		all = append(all, des...)
		if err == io.EOF || (err == nil && len(des) == 0) {
			return all, nil
		}
		if err != nil {
			return all, unwrapPath(err)
		}
	}
}

func join(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return path.Join(dir, name)
}
