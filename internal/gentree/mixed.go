package gentree

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"time"
)

// Shape of a Mixed tree.
const (
	mixedMedian   = 4096     // median file size
	mixedSigma    = 1.7      // log-normal sigma: ~2-4 MiB largest file among 20,000
	mixedMaxSize  = 16 << 20 // cap of the tail
	mixedPerDir   = 25       // files per directory on average
	mixedMaxDepth = 12       // of the random directories (the deep chain goes further)
	mixedSpan     = 5 * 365 * 24 * time.Hour
)

// MixedSpecialFiles is the number of regular files every Mixed tree has
// whatever n: in the read-only directory, the sticky directory and at the
// bottom of the deep chain.
const MixedSpecialFiles = 8

type mixedDir struct {
	rel      string // slash-separated, "." for the root
	depth    int
	perm     fs.FileMode
	mtime    time.Time
	fillable bool // random files, links and subdirectories may go here
}

type mixedLink struct {
	rel, target string // rel: where; target: hard link's file (rel) or symlink's text
	mtime       time.Time
}

// Mixed writes a realistic tree of about n regular files under dir (created
// if missing), fully determined by n and seed:
//
//   - file sizes log-normal, median 4 KiB, a long tail to a few MiB (capped
//     at 16 MiB), 1% empty files; about 17 KiB on average, so n=20,000 is
//     about 350 MB;
//   - about n/25 directories nested at random, 1 to 12 levels deep, and a
//     chain "deep/..." whose paths exceed 380 bytes;
//   - names mostly ASCII, some with spaces, some non-ASCII (UTF-8);
//   - file modes among 0644, 0600, 0640, 0664, 0755, 0700, 0444; directory
//     modes among 0755, 0750, 0700, 0775; a read-only directory "readonly"
//     (0555) holding files, and a sticky directory "sticky" (01777); no
//     setuid or setgid bits;
//   - mtimes spread over the five years before Epoch, with nanoseconds, on
//     files, directories and symlinks;
//   - n/200 (at least 2) extra names of existing files as hard links, some in
//     the same directory and some across directories;
//   - n/200 (at least 3) symlinks with relative targets inside the tree: to
//     files, to a directory, and one dangling;
//   - empty directories: "empty", "empty-nested/a/b" and n/2000 more.
//
// For n >= 100 the tree has exactly n names of regular files (hard links'
// extra names included); below that, the special entries still exist.
func Mixed(dir string, n int, seed uint64) error {
	if n < 0 {
		return errors.New("gentree: negative count")
	}
	p := planMixed(n, seed)
	return p.write(dir)
}

type mixedPlan struct {
	dirs     []mixedDir
	files    []fileSpec // path relative (slash-separated) until write
	hard     []mixedLink
	symlinks []mixedLink
}

func planMixed(n int, seed uint64) *mixedPlan {
	rng := rand.New(rand.NewPCG(seed, 0x6d697865642d7472))
	p := &mixedPlan{}
	mtime := func() time.Time { return Epoch.Add(-time.Duration(rng.Int64N(int64(mixedSpan)))) }
	addDir := func(parent int, name string, perm fs.FileMode, fillable bool) int {
		pd := p.dirs[parent]
		p.dirs = append(p.dirs, mixedDir{
			rel: path.Join(pd.rel, name), depth: pd.depth + 1,
			perm: perm, mtime: mtime(), fillable: fillable,
		})
		return len(p.dirs) - 1
	}
	addFile := func(d int, name string, size int64, perm fs.FileMode) {
		p.files = append(p.files, fileSpec{
			path: path.Join(p.dirs[d].rel, name),
			size: size, perm: perm, mtime: mtime(), seed: rng.Uint64(), kind: contentOf(name),
		})
	}

	p.dirs = append(p.dirs, mixedDir{rel: ".", perm: 0o755, mtime: mtime(), fillable: true})

	// Random directories: each hangs under the root or under a random earlier
	// directory, which gives a spread of depths.
	nDirs := max(8, n/mixedPerDir)
	for i := 1; i < nDirs; i++ {
		parent := 0
		if rng.IntN(4) != 0 {
			parent = rng.IntN(len(p.dirs))
		}
		if p.dirs[parent].depth >= mixedMaxDepth {
			parent = 0
		}
		addDir(parent, dirName(rng, i), pick(rng, dirPerms), true)
	}
	fillable := len(p.dirs)

	// Special directories.
	ro := addDir(0, "readonly", 0o555, false)
	for i := range 5 {
		perm := fs.FileMode(0o644)
		if i == 0 {
			perm = 0o444
		}
		addFile(ro, fmt.Sprintf("ro-file-%d.txt", i), logNormal(rng), perm)
	}
	st := addDir(0, "sticky", 0o777|fs.ModeSticky, false)
	addFile(st, "scratch-a.tmp", logNormal(rng), 0o666)
	addFile(st, "scratch-b.tmp", logNormal(rng), 0o600)
	d := addDir(0, "deep", 0o755, false)
	for i := range 10 {
		d = addDir(d, fmt.Sprintf("level-%02d-abcdefghijklmnopqrstuvwxyz", i+1), 0o755, false)
	}
	addFile(d, "at the bottom of a very long path.txt", logNormal(rng), 0o644)
	addDir(0, "empty", 0o755, false)
	d = addDir(0, "empty-nested", 0o755, false)
	d = addDir(d, "a", 0o755, false)
	addDir(d, "b", 0o755, false)
	for i := range n / 2000 {
		addDir(rng.IntN(fillable), fmt.Sprintf("empty-%d", i), pick(rng, dirPerms), false)
	}

	// Regular files, then extra names for some of them.
	nHard := max(2, n/200)
	nFiles := max(n-nHard-len(p.files), 1)
	first := len(p.files)
	for i := range nFiles {
		size := logNormal(rng)
		if rng.IntN(100) == 0 {
			size = 0
		}
		addFile(rng.IntN(fillable), fileName(rng, i), size, pick(rng, filePerms))
	}
	random := p.files[first:]
	for i := range nHard {
		target := random[rng.IntN(len(random))].path
		var where string
		if rng.IntN(3) == 0 {
			where = path.Dir(target)
		} else {
			where = p.dirs[rng.IntN(fillable)].rel
		}
		p.hard = append(p.hard, mixedLink{rel: path.Join(where, fmt.Sprintf("hardlink-%05d", i)), target: target})
	}

	// Symlinks, with targets relative to the link's directory.
	nSym := max(3, n/200)
	for i := range nSym {
		where := p.dirs[rng.IntN(fillable)].rel
		var target string
		switch i {
		case 0:
			target = "no such file"
		case 1:
			target = p.dirs[rng.IntN(fillable)].rel
		default:
			target = p.files[rng.IntN(len(p.files))].path
		}
		if i != 0 {
			target = relPath(where, target)
		}
		p.symlinks = append(p.symlinks, mixedLink{
			rel: path.Join(where, fmt.Sprintf("symlink-%05d", i)), target: target, mtime: mtime(),
		})
	}
	return p
}

// relPath returns target (relative to the root) as seen from directory from
// (also relative to the root).
func relPath(from, target string) string {
	r, err := filepath.Rel(filepath.FromSlash(from), filepath.FromSlash(target))
	if err != nil { // cannot happen: both are relative to the same root
		panic(err)
	}
	return filepath.ToSlash(r)
}

func (p *mixedPlan) write(root string) error {
	full := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for _, d := range p.dirs[1:] {
		if err := os.Mkdir(full(d.rel), 0o700); err != nil {
			return err
		}
	}
	err := writeAll(len(p.files), func(i int, spec *fileSpec) {
		*spec = p.files[i]
		spec.path = full(spec.path)
	})
	if err != nil {
		return err
	}
	for _, l := range p.hard {
		if err := os.Link(full(l.target), full(l.rel)); err != nil {
			return err
		}
	}
	for _, l := range p.symlinks {
		if err := os.Symlink(l.target, full(l.rel)); err != nil {
			return err
		}
		if err := lchtimes(full(l.rel), l.mtime); err != nil {
			return err
		}
	}
	// Children come after their parents in p.dirs: go backwards.
	for i := len(p.dirs) - 1; i >= 0; i-- {
		d := p.dirs[i]
		if err := setMeta(full(d.rel), d.perm, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

func logNormal(rng *rand.Rand) int64 {
	s := math.Exp(math.Log(mixedMedian) + mixedSigma*rng.NormFloat64())
	return int64(min(max(s, 1), mixedMaxSize))
}

type weighted[T any] struct {
	w int
	v T
}

var filePerms = []weighted[fs.FileMode]{
	{70, 0o644}, {10, 0o600}, {5, 0o640}, {2, 0o664}, {8, 0o755}, {1, 0o700}, {4, 0o444},
}

var dirPerms = []weighted[fs.FileMode]{
	{85, 0o755}, {6, 0o750}, {4, 0o700}, {5, 0o775},
}

func pick[T any](rng *rand.Rand, ws []weighted[T]) T {
	total := 0
	for _, w := range ws {
		total += w.w
	}
	r := rng.IntN(total)
	for _, w := range ws {
		if r < w.w {
			return w.v
		}
		r -= w.w
	}
	panic("unreachable")
}

var (
	exts         = []string{".txt", ".dat", ".log", ".json", ".bin", ".csv", ".go", ""}
	spacedFiles  = []string{"report %d final draft.txt", "Copy of notes %d.md", "photo %d (1).jpg"}
	unicodeFiles = []string{"résumé-%d.pdf", "файл-%d.dat", "数据-%d.csv", "Ünïcödé %d.txt", "naïve café %d.md", "ファイル %d.bin"}
	spacedDirs   = []string{"My Documents %d", "old backups %d"}
	unicodeDirs  = []string{"données-%d", "каталог %d", "目录-%d", "Ελληνικά %d"}
)

// fileName returns the name of the i-th random file; i makes it unique.
func fileName(rng *rand.Rand, i int) string {
	switch r := rng.IntN(100); {
	case r < 3:
		return fmt.Sprintf(spacedFiles[rng.IntN(len(spacedFiles))], i)
	case r < 6:
		return fmt.Sprintf(unicodeFiles[rng.IntN(len(unicodeFiles))], i)
	}
	return fmt.Sprintf("file-%06d%s", i, exts[rng.IntN(len(exts))])
}

// dirName returns the name of the i-th random directory; i makes it unique.
func dirName(rng *rand.Rand, i int) string {
	switch r := rng.IntN(100); {
	case r < 3:
		return fmt.Sprintf(spacedDirs[rng.IntN(len(spacedDirs))], i)
	case r < 6:
		return fmt.Sprintf(unicodeDirs[rng.IntN(len(unicodeDirs))], i)
	}
	return fmt.Sprintf("dir-%04d", i)
}
