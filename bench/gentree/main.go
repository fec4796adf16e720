// Command gentree writes a deterministic benchmark or test tree with
// internal/gentree.
//
//	gentree -kind small -n 100000 -size 1KiB -dirs 1000 -o DIR  # N files of SIZE in DIRS dirs
//	gentree -kind small -n 700000 -size 0 -dirs 100000 -links 1 -o DIR  # and a symlink and a hard link in each
//	gentree -kind mixed -n 20000 -seed 1 -o DIR                 # realistic mixed tree
//	gentree -kind half -n 20000 -seed 1 -o DIR                  # mixed's layout, files half random, half repeated text (404 MB)
//	gentree -kind random -n 20000 -seed 1 -o DIR                # mixed's layout and sizes, random bytes
//	gentree -kind large -n 4 -size 256MiB -o DIR                # N large files
//	gentree -kind huge -size 4GiB -n 100000 -o DIR              # one SIZE file + N × 1 KiB in DIR/small
//
// Sizes are read as rsync reads them (internal/units): K, M, G or KiB, MiB,
// GiB are powers of 1024, KB, MB, GB powers of 1000, a bare number bytes.
// DIR is created if missing; the generated names must not exist in it. A
// one-line summary goes to stderr unless -q.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/units"
)

func main() {
	kind := flag.String("kind", "small", "tree to generate: small, mixed, half, random, large, huge or snapshots (two snapshots, s1 and s2, of n empty files, hard-linked)")
	n := flag.Int("n", 0, "number of files (default: small 100000, mixed, half and random 20000, large 4, huge 100000 small files)")
	sizeFlag := flag.String("size", "", "file size (default: small 1KiB, large 256MiB, huge 4GiB for the big file)")
	dirs := flag.Int("dirs", -1, "small, huge: number of subdirectories for the small files (default n/100, 0 puts them all in DIR)")
	seed := flag.Uint64("seed", 1, "mixed, half, random: seed of the tree")
	links := flag.Int("links", 0, "small: add this many symlinks and as many hard links in each subdirectory")
	out := flag.String("o", "", "output directory (required)")
	quiet := flag.Bool("q", false, "no summary on stderr")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: gentree -kind small|mixed|half|random|large|huge|snapshots [-n N] [-size S] [-dirs D] [-seed S] -o DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	var size int64
	if *sizeFlag != "" {
		var err error
		if size, err = units.ParseSize(*sizeFlag, units.BareBytes); err != nil {
			fatalf("-size: %v", err)
		}
	}
	def := func(v *int, d int) int {
		if *v > 0 {
			return *v
		}
		return d
	}
	smallDirs := func(files int) int {
		if *dirs >= 0 {
			return *dirs
		}
		return max(files/100, 1)
	}

	start := time.Now()
	var err error
	switch *kind {
	case "small":
		files := def(n, 100_000)
		if *sizeFlag == "" {
			size = 1024
		}
		err = gentree.Small(*out, files, smallDirs(files), int(size))
		if err == nil && *links > 0 {
			err = gentree.Links(*out, *links)
		}
	case "mixed", "half", "random":
		if *sizeFlag != "" {
			fatalf("-size does not apply to -kind %s", *kind)
		}
		gen := map[string]func(string, int, uint64) error{"mixed": gentree.Mixed, "half": gentree.Half, "random": gentree.Random}[*kind]
		err = gen(*out, def(n, 20_000), *seed)
	case "large":
		if *sizeFlag == "" {
			size = 256 << 20
		}
		err = gentree.Large(*out, def(n, 4), size)
	case "huge":
		if *sizeFlag == "" {
			size = 4 << 30
		}
		files := def(n, 100_000)
		if err = gentree.Small(filepath.Join(*out, "small"), files, smallDirs(files), 1024); err == nil {
			err = gentree.Large(*out, 1, size)
		}
	case "snapshots":
		err = gentree.Snapshots(*out, def(n, 100_000))
	default:
		fatalf("unknown -kind %q (small, mixed, half, random, large, huge, snapshots)", *kind)
	}
	if err != nil {
		fatalf("%v", err)
	}
	elapsed := time.Since(start)
	if !*quiet {
		files, dirs, bytes := count(*out)
		fmt.Fprintf(os.Stderr, "gentree: %s tree in %s: %s files, %s dirs, %s in %.2fs\n",
			*kind, *out, units.Count(int64(files)), units.Count(int64(dirs)), units.Size(bytes), elapsed.Seconds())
	}
}

// count returns the regular files (every name), directories (the root
// included) and bytes (of every name) under dir.
func count(dir string) (files, dirs int, bytes int64) {
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		switch {
		case d.IsDir():
			dirs++
		case d.Type().IsRegular():
			files++
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	return
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gentree: "+format+"\n", args...)
	os.Exit(1)
}
