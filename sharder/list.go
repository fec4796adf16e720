package sharder

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/bulkmove/bulkmove/filter"
)

// ListChunk is about how many names ListDirs gives at a time: a directory
// with more comes in several parts.
const ListChunk = 4096

// ListDirs walks the directories under root (not following symlinks) and
// calls fn for each with the names it holds that rules do not exclude;
// excluded directories are not entered. dir is slash-separated and
// relative to root ("." for root itself). A directory of more than about
// ListChunk names comes in parts, in the order read: more says that
// another part of the same directory follows (the last part, which may
// have no names, has more false). This is the source side of --delete:
// memory is a part of one directory's names at a time (and the names of
// the subdirectories still to list).
func ListDirs(ctx context.Context, root string, rules *filter.Rules, fn func(dir string, names []string, more bool) error) error {
	return listDir(ctx, root, ".", rules, fn)
}

func listDir(ctx context.Context, root, rel string, rules *filter.Rules, fn func(string, []string, bool) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("list %s: %w", rel, err)
	}
	var names, subdirs []string
	for {
		des, err := f.ReadDir(1024)
		for _, de := range des {
			p := de.Name()
			if rel != "." {
				p = path.Join(rel, de.Name())
			}
			isDir := de.IsDir()
			if rules.Excluded(p, isDir) {
				continue
			}
			names = append(names, de.Name())
			if isDir {
				subdirs = append(subdirs, p)
			}
		}
		if err == io.EOF || (err == nil && len(des) == 0) {
			break
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("list %s: %w", rel, err)
		}
		if len(names) >= ListChunk {
			if err := fn(rel, names, true); err != nil {
				f.Close()
				return err
			}
			names = nil
		}
	}
	f.Close()
	if err := fn(rel, names, false); err != nil {
		return err
	}
	for _, d := range subdirs {
		if err := listDir(ctx, root, d, rules, fn); err != nil {
			return err
		}
	}
	return nil
}
