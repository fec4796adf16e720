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

// ListDirs walks the directories under root (not following symlinks) and
// calls fn for each with the names it holds that rules do not exclude;
// excluded directories are not entered. dir is slash-separated and
// relative to root ("." for root itself). This is the source side of
// --delete: memory is one directory's names at a time.
func ListDirs(ctx context.Context, root string, rules *filter.Rules, fn func(dir string, names []string) error) error {
	return listDir(ctx, root, ".", rules, fn)
}

func listDir(ctx context.Context, root, rel string, rules *filter.Rules, fn func(string, []string) error) error {
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
	}
	f.Close()
	if err := fn(rel, names); err != nil {
		return err
	}
	for _, d := range subdirs {
		if err := listDir(ctx, root, d, rules, fn); err != nil {
			return err
		}
	}
	return nil
}
