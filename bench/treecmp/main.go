// Command treecmp compares two directory trees with internal/treecmp and
// exits 0 when they are equal, 1 when they differ (listing the differences on
// stdout) and 2 on a usage or read error.
//
//	treecmp [-allow-extra] [-mode-mask 0777] [-owner] [-mtime-precision 1s] SRC DST
//
// By default the comparison is strict: names, types, content, mode & 07777,
// nanosecond mtimes of files and directories, symlink targets, hard links.
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strconv"

	"github.com/bulkmove/bulkmove/internal/treecmp"
)

type globs []string

func (g *globs) String() string     { return fmt.Sprint(*g) }
func (g *globs) Set(s string) error { *g = append(*g, s); return nil }

func main() {
	var (
		opt  treecmp.Options
		mask = flag.String("mode-mask", "07777", "mode bits to compare, octal (0777 ignores setuid, setgid, sticky)")
		maxN = flag.Int("max", 50, "list at most this many differences (0: all)")
		skip globs
	)
	flag.BoolVar(&opt.AllowExtra, "allow-extra", false, "accept names in DST that SRC lacks")
	flag.BoolVar(&opt.IgnoreMode, "no-mode", false, "do not compare mode bits")
	flag.BoolVar(&opt.IgnoreMtime, "no-mtime", false, "do not compare mtimes")
	flag.BoolVar(&opt.IgnoreDirMtime, "no-dir-mtime", false, "do not compare directory mtimes")
	flag.BoolVar(&opt.SymlinkMtime, "symlink-mtime", false, "also compare the mtimes of symlinks")
	flag.DurationVar(&opt.MtimePrecision, "mtime-precision", 0, "compare mtimes truncated to this (e.g. 1s); 0: nanoseconds")
	flag.BoolVar(&opt.IgnoreHardlinks, "no-hardlinks", false, "do not compare hard-link groups")
	flag.BoolVar(&opt.Owner, "owner", false, "also compare numeric uid and gid")
	flag.Var(&skip, "skip", "leave out names whose relative path or base name matches this glob, on both sides (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: treecmp [flags] SRC DST\nexit status: 0 equal, 1 different, 2 error\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	m, err := strconv.ParseUint(*mask, 8, 32)
	if err != nil || m == 0 || m > 0o7777 {
		fmt.Fprintf(os.Stderr, "treecmp: bad -mode-mask %q\n", *mask)
		os.Exit(2)
	}
	opt.ModeMask = uint32(m)
	for _, g := range skip {
		if _, err := path.Match(g, ""); err != nil {
			fmt.Fprintf(os.Stderr, "treecmp: bad -skip %q: %v\n", g, err)
			os.Exit(2)
		}
	}
	if len(skip) > 0 {
		opt.Skip = func(p string) bool {
			for _, g := range skip {
				if ok, _ := path.Match(g, p); ok {
					return true
				}
				if ok, _ := path.Match(g, path.Base(p)); ok {
					return true
				}
			}
			return false
		}
	}

	src, dst := flag.Arg(0), flag.Arg(1)
	diffs, err := treecmp.Compare(src, dst, opt)
	if err != nil {
		fmt.Fprintf(os.Stderr, "treecmp: %v\n", err)
		os.Exit(2)
	}
	if len(diffs) == 0 {
		return
	}
	fmt.Printf("treecmp: %s and %s differ (%d differences):\n%s", src, dst, len(diffs), treecmp.Format(diffs, *maxN))
	os.Exit(1)
}
