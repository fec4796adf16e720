package gentree

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Links adds, in each subdirectory of dir (as Small makes them), k
// symlinks s0..s(k-1) to files of that directory and k second names
// h0..h(k-1) of them: entries a move sets aside for its end (a tree of
// Small's with Links holds as many of them as a backup tree of snapshots
// or a source tree of symlinks). Four directories at a time.
func Links(dir string, k int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		wg.Go(func() {
			for i := w; i < len(ents) && errs[w] == nil; i += len(errs) {
				if ents[i].IsDir() {
					errs[w] = linksIn(filepath.Join(dir, ents[i].Name()), k)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func linksIn(d string, k int) error {
	names, err := os.ReadDir(d)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("gentree: links: %s is empty", d)
	}
	for i := range k {
		first := names[i%len(names)].Name()
		if err := os.Symlink(first, filepath.Join(d, fmt.Sprintf("s%d", i))); err != nil {
			return err
		}
		if err := os.Link(filepath.Join(d, first), filepath.Join(d, fmt.Sprintf("h%d", i))); err != nil {
			return err
		}
	}
	return nil
}

// Snapshots makes in dir two snapshots of one tree of files, as a backup
// keeps them: s1, a tree of Small's (files empty files in files/100+1
// directories), and s2, the same directories with every file of s1 linked
// under the same name. A walk meets the first name of every file in s1
// long before its second in s2: it keeps every file's hard-link set open
// from one to the other.
func Snapshots(dir string, files int) error {
	s1, s2 := filepath.Join(dir, "s1"), filepath.Join(dir, "s2")
	if err := Small(s1, files, files/100+1, 0); err != nil {
		return err
	}
	return filepath.WalkDir(s1, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(s1, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(s2, rel), 0o755)
		}
		return os.Link(p, filepath.Join(s2, rel))
	})
}
