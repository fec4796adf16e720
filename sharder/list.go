package sharder

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/spill"
)

// ListChunk is about how many names ListDirs gives at a time: a directory
// with more comes in several parts.
const ListChunk = 4096

// ListDirs walks the directories under root (following no symlink but as
// links says) and calls fn for each with the names it holds that rules
// do not exclude;
// excluded directories are not entered. dir is slash-separated and
// relative to root ("." for root itself). A directory of more than about
// ListChunk names comes in parts, in the order read: more says that
// another part of the same directory follows (the last part, which may
// have no names, has more false). Directories come in the order of a
// recursive listing: each before its subdirectories, these in the order
// read, each with all below it. This is the source side of --delete:
// memory is a part of one directory's names at a time, and up to
// DefaultDirMem paths of the directories still to list (the rest wait in
// a temporary file: a directory of millions of subdirectories costs no
// memory for their names).
//
// links are the walk's (-L, --copy-unsafe-links): a symlink it follows
// to a directory is listed as that directory, as the walk moved it.
func ListDirs(ctx context.Context, root string, rules *filter.Rules, links Links, fn func(dir string, names []string, more bool) error) error {
	return listDirs(ctx, root, rules, links, DefaultDirMem, "", nil, fn)
}

// listDirs is ListDirs with mem paths of directories to list in memory
// (in each of its two stacks) and their spill files in spillDir; peak, if
// not nil, gets the most either stack held in memory.
func listDirs(ctx context.Context, root string, rules *filter.Rules, links Links, mem int, spillDir string, peak *int, fn func(string, []string, bool) error) error {
	// todo is what is left to list, the next on top; sub gathers the
	// subdirectories of the directory being listed, to go onto todo in
	// reverse, so that the first read comes off first.
	todo := spill.NewStack(spillDir, mem, spill.StringCodec{})
	defer todo.Close()
	sub := spill.NewStack(spillDir, mem, spill.StringCodec{})
	defer sub.Close()
	note := func(n int) {
		if peak != nil {
			*peak = max(*peak, n)
		}
	}
	scopes, err := rules.NewScopes(filter.Tree{Root: root})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	todo.Push(".")
	for {
		rel, ok, err := todo.Pop()
		if err != nil {
			return fmt.Errorf("list: reading back the directories still to list: %w", err)
		}
		if !ok {
			return nil
		}
		if err := listDir(ctx, root, rel, scopes, links, sub, note, fn); err != nil {
			return err
		}
		for {
			d, ok, err := sub.Pop()
			if err != nil {
				return fmt.Errorf("list %s: reading back its subdirectories: %w", rel, err)
			}
			if !ok {
				break
			}
			todo.Push(d)
			note(todo.InMem())
		}
	}
}

// followsToDir says whether the walk follows the symlink p (under root)
// to a directory.
func followsToDir(root, p string, links Links) bool {
	full := filepath.Join(root, filepath.FromSlash(p))
	target, err := os.Readlink(full)
	if err != nil || !links.Follows(p, target) {
		return false
	}
	fi, err := os.Stat(full)
	return err == nil && fi.IsDir()
}

// listDir lists one directory, calls fn with its names and pushes its
// subdirectories on sub.
func listDir(ctx context.Context, root, rel string, scopes *filter.Scopes, links Links, sub *spill.Stack[string], note func(int), fn func(string, []string, bool) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	defer f.Close()
	sc, err := scopes.Enter(rel)
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	defer sc.Done()
	rules := sc.Dir()
	var names []string
	for {
		des, err := f.ReadDir(1024)
		for _, de := range des {
			p := de.Name()
			if rel != "." {
				p = path.Join(rel, de.Name())
			}
			isDir := de.IsDir()
			if de.Type() == fs.ModeSymlink && links.Any() {
				isDir = followsToDir(root, p, links)
			}
			if rules.Excluded(p, isDir) {
				continue
			}
			names = append(names, de.Name())
			if isDir {
				sc.Push(1)
				sub.Push(p)
				note(sub.InMem())
			}
		}
		if err == io.EOF || (err == nil && len(des) == 0) {
			break
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", rel, err)
		}
		if len(names) >= ListChunk {
			if err := fn(rel, names, true); err != nil {
				return err
			}
			names = nil
		}
	}
	return fn(rel, names, false)
}
