// Package treecmp compares two directory trees name by name and reports every
// difference that matters to a move: the set of names, their types, file
// content, permission bits, modification times (nanoseconds), symlink
// targets, device numbers, hard links, empty directories and, when asked,
// numeric owners.
//
// It is the oracle of every end-to-end test (Equal) and of the benchmark's
// verification step (bench/treecmp). Both trees are read with Lstat, so
// symlinks are compared as links, never followed; the two roots themselves are
// followed (os.Stat) and compared like any other directory, under the path ".".
//
// Hard links are compared as groups: names that share an inode in src must
// share one in dst and vice versa (only names present in both trees count, so
// a missing name is reported once, as missing, not again as a broken link).
package treecmp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Kinds of difference, the values of Diff.What.
const (
	Missing  = "missing"  // in src, not in dst
	Extra    = "extra"    // in dst, not in src (unless Options.AllowExtra)
	Type     = "type"     // file vs directory vs symlink vs other
	Size     = "size"     // regular files of different sizes
	Content  = "content"  // same size, different bytes
	Mode     = "mode"     // permission bits (mode & 07777 & Options.ModeMask)
	Rdev     = "rdev"     // a device's major and minor
	Mtime    = "mtime"    // modification time
	Link     = "link"     // symlink target
	Hardlink = "hardlink" // hard-link groups differ
	Owner    = "owner"    // numeric uid/gid (Options.Owner only)
)

// DefaultModeMask is the set of mode bits compared when Options.ModeMask is
// zero: permissions plus setuid, setgid and sticky.
const DefaultModeMask = 0o7777

// Options tunes a comparison. The zero value is the strict comparison every
// end-to-end test of a move wants.
type Options struct {
	// AllowExtra accepts names in dst that src lacks.
	AllowExtra bool

	// ModeMask selects the Unix mode bits compared (of mode & 07777).
	// Zero means DefaultModeMask; 0o777 ignores setuid, setgid and sticky.
	ModeMask uint32
	// IgnoreMode skips the comparison of mode bits altogether.
	IgnoreMode bool

	// IgnoreMtime skips every mtime comparison.
	IgnoreMtime bool
	// IgnoreDirMtime skips the mtime of directories (the root included).
	IgnoreDirMtime bool
	// SymlinkMtime also compares the mtime of symlinks themselves.
	SymlinkMtime bool
	// MtimePrecision, when positive, compares mtimes truncated to it
	// (time.Second for tools that keep only seconds). Zero: nanoseconds.
	MtimePrecision time.Duration

	// IgnoreHardlinks skips the comparison of hard-link groups.
	IgnoreHardlinks bool

	// Owner also compares numeric uid and gid (of every entry, symlinks too).
	Owner bool

	// Skip, if set, is called with each path (slash-separated, relative to
	// the roots, never ".") found in either tree; a true result leaves that
	// name (and, for a directory, everything under it) out of the
	// comparison on both sides. Use it for names a move excludes.
	Skip func(path string) bool
}

// Diff is one difference between the trees.
type Diff struct {
	Path   string // slash-separated, relative to the roots; "." is the root
	What   string // one of Missing, Extra, Type, Size, Content, Mode, Rdev, Mtime, Link, Hardlink, Owner
	Detail string // human-readable: the two values, src first
}

// String returns "path: what: detail".
func (d Diff) String() string {
	if d.Detail == "" {
		return d.Path + ": " + d.What
	}
	return d.Path + ": " + d.What + ": " + d.Detail
}

// node is what the comparison needs of one name.
type node struct {
	mode     fs.FileMode // type bits of fs.FileMode
	perm     uint32      // unix mode & 07777
	size     int64
	mtime    time.Time
	uid, gid uint32
	dev, ino uint64
	nlink    uint64
	rdev     uint64 // a device's number
}

func newNode(fi fs.FileInfo) node {
	n := node{
		mode:  fi.Mode().Type(),
		perm:  unixPerm(fi.Mode()),
		size:  fi.Size(),
		mtime: fi.ModTime(),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n.uid, n.gid = st.Uid, st.Gid
		n.dev, n.ino, n.nlink, n.rdev = uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink), uint64(st.Rdev)
	}
	return n
}

func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m&fs.ModeDir != 0:
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "chardev"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

type inodeKey struct{ dev, ino uint64 }

type comparer struct {
	src, dst string
	opt      Options
	mask     uint32

	mu    sync.Mutex
	diffs []Diff
	err   error

	// Hard-link bookkeeping: for every regular file present in both trees
	// whose link count is above one on either side.
	srcGroups map[inodeKey][]string
	dstGroups map[inodeKey][]string
	linked    []linkedName

	jobs chan string // relative paths of same-size files whose content to compare
	wg   sync.WaitGroup
	buf  sync.Pool
}

type linkedName struct {
	path     string
	src, dst inodeKey
}

// Compare walks src and dst and returns their differences, sorted by path.
// A missing dst root is reported as a single Missing diff at "."; an error
// reading either tree (including a missing src) is returned as an error.
func Compare(src, dst string, opt Options) ([]Diff, error) {
	c := &comparer{
		src: src, dst: dst, opt: opt,
		mask:      opt.ModeMask,
		srcGroups: map[inodeKey][]string{},
		dstGroups: map[inodeKey][]string{},
		jobs:      make(chan string, 256),
	}
	if c.mask == 0 {
		c.mask = DefaultModeMask
	}
	c.buf.New = func() any { b := make([]byte, 2*64<<10); return &b }

	sfi, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("treecmp: source: %w", err)
	}
	dfi, err := os.Stat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return []Diff{{Path: ".", What: Missing, Detail: "destination " + dst + " does not exist"}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("treecmp: destination: %w", err)
	}

	workers := min(runtime.GOMAXPROCS(0), 8)
	for range workers {
		c.wg.Add(1)
		go c.contentWorker()
	}
	c.compareNode(".", newNode(sfi), newNode(dfi))
	close(c.jobs)
	c.wg.Wait()
	if c.err != nil {
		return nil, c.err
	}
	if !opt.IgnoreHardlinks {
		c.compareHardlinks()
	}
	slices.SortStableFunc(c.diffs, func(a, b Diff) int { return strings.Compare(a.Path, b.Path) })
	return c.diffs, nil
}

func (c *comparer) add(p, what, format string, args ...any) {
	c.mu.Lock()
	c.diffs = append(c.diffs, Diff{Path: p, What: what, Detail: fmt.Sprintf(format, args...)})
	c.mu.Unlock()
}

func (c *comparer) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (c *comparer) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *comparer) full(root, rel string) string {
	if rel == "." {
		return root
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// compareNode compares one name present in both trees and, for directories,
// recurses into it.
func (c *comparer) compareNode(p string, s, d node) {
	if c.failed() {
		return
	}
	if s.mode != d.mode {
		c.add(p, Type, "src is a %s, dst is a %s", typeName(s.mode), typeName(d.mode))
		return
	}
	if !c.opt.IgnoreMode && s.perm&c.mask != d.perm&c.mask {
		c.add(p, Mode, "src %04o, dst %04o", s.perm&c.mask, d.perm&c.mask)
	}
	if c.opt.Owner && (s.uid != d.uid || s.gid != d.gid) {
		c.add(p, Owner, "src %d:%d, dst %d:%d", s.uid, s.gid, d.uid, d.gid)
	}
	checkMtime := !c.opt.IgnoreMtime
	switch {
	case s.mode&fs.ModeSymlink != 0:
		checkMtime = checkMtime && c.opt.SymlinkMtime
	case s.mode&fs.ModeDir != 0:
		checkMtime = checkMtime && !c.opt.IgnoreDirMtime
	}
	if checkMtime {
		st, dt := s.mtime, d.mtime
		if c.opt.MtimePrecision > 0 {
			st, dt = st.Truncate(c.opt.MtimePrecision), dt.Truncate(c.opt.MtimePrecision)
		}
		if !st.Equal(dt) {
			c.add(p, Mtime, "src %s, dst %s", fmtTime(s.mtime), fmtTime(d.mtime))
		}
	}

	switch {
	case s.mode.IsRegular():
		if s.size != d.size {
			c.add(p, Size, "src %d bytes, dst %d bytes", s.size, d.size)
		} else if s.size > 0 {
			c.jobs <- p
		}
		if !c.opt.IgnoreHardlinks && (s.nlink > 1 || d.nlink > 1) {
			sk, dk := inodeKey{s.dev, s.ino}, inodeKey{d.dev, d.ino}
			c.srcGroups[sk] = append(c.srcGroups[sk], p)
			c.dstGroups[dk] = append(c.dstGroups[dk], p)
			c.linked = append(c.linked, linkedName{p, sk, dk})
		}
	case s.mode&fs.ModeSymlink != 0:
		st, err := os.Readlink(c.full(c.src, p))
		if err != nil {
			c.fail(fmt.Errorf("treecmp: %w", err))
			return
		}
		dt, err := os.Readlink(c.full(c.dst, p))
		if err != nil {
			c.fail(fmt.Errorf("treecmp: %w", err))
			return
		}
		if st != dt {
			c.add(p, Link, "src -> %q, dst -> %q", st, dt)
		}
	case s.mode&fs.ModeDir != 0:
		c.compareDir(p)
	case s.mode&fs.ModeDevice != 0 && s.rdev != d.rdev:
		c.add(p, Rdev, "src %d:%d, dst %d:%d", unix.Major(s.rdev), unix.Minor(s.rdev), unix.Major(d.rdev), unix.Minor(d.rdev))
	}
}

func fmtTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

type dirent struct {
	name string
	n    node
}

func (c *comparer) readDir(root, rel string) ([]dirent, error) {
	dir := c.full(root, rel)
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("treecmp: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("treecmp: read %s: %w", dir, err)
	}
	slices.Sort(names)
	out := make([]dirent, 0, len(names))
	for _, name := range names {
		child := join(rel, name)
		if c.opt.Skip != nil && c.opt.Skip(child) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("treecmp: %w", err)
		}
		out = append(out, dirent{name, newNode(fi)})
	}
	return out, nil
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return path.Join(dir, name)
}

// compareDir merges the sorted listings of one directory in both trees.
func (c *comparer) compareDir(p string) {
	ss, err := c.readDir(c.src, p)
	if err != nil {
		c.fail(err)
		return
	}
	ds, err := c.readDir(c.dst, p)
	if err != nil {
		c.fail(err)
		return
	}
	i, j := 0, 0
	for i < len(ss) || j < len(ds) {
		switch {
		case j == len(ds) || (i < len(ss) && ss[i].name < ds[j].name):
			c.add(join(p, ss[i].name), Missing, "%s not in dst", typeName(ss[i].n.mode))
			i++
		case i == len(ss) || ds[j].name < ss[i].name:
			if !c.opt.AllowExtra {
				c.add(join(p, ds[j].name), Extra, "%s not in src", typeName(ds[j].n.mode))
			}
			j++
		default:
			c.compareNode(join(p, ss[i].name), ss[i].n, ds[j].n)
			i++
			j++
		}
	}
}

func (c *comparer) contentWorker() {
	defer c.wg.Done()
	for p := range c.jobs {
		if c.failed() {
			continue
		}
		same, off, err := c.sameContent(c.full(c.src, p), c.full(c.dst, p))
		switch {
		case err != nil:
			c.fail(fmt.Errorf("treecmp: %w", err))
		case !same:
			c.add(p, Content, "first difference at byte %d", off)
		}
	}
}

// sameContent compares two files byte for byte; off is the offset of the first
// difference when they differ.
func (c *comparer) sameContent(a, b string) (same bool, off int64, err error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, 0, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, 0, err
	}
	defer fb.Close()
	bp := c.buf.Get().(*[]byte)
	defer c.buf.Put(bp)
	half := len(*bp) / 2
	ba, bb := (*bp)[:half], (*bp)[half:]
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if ea != nil && ea != io.EOF && ea != io.ErrUnexpectedEOF {
			return false, 0, ea
		}
		if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
			return false, 0, eb
		}
		if !bytes.Equal(ba[:na], bb[:nb]) {
			n := min(na, nb)
			k := 0
			for k < n && ba[k] == bb[k] {
				k++
			}
			return false, off + int64(k), nil
		}
		off += int64(na)
		if ea != nil || eb != nil { // short read: both at EOF, since equal
			return true, 0, nil
		}
	}
}

// compareHardlinks checks that, among names present in both trees, the
// partition into inode groups is the same on both sides.
func (c *comparer) compareHardlinks() {
	for _, ln := range c.linked {
		sg := c.srcGroups[ln.src]
		dg := c.dstGroups[ln.dst]
		if slices.Equal(sg, dg) { // both built in walk order, so comparable
			continue
		}
		// Report each disagreement once, at the smallest name involved.
		first := ln.path
		for _, q := range append(slices.Clone(sg), dg...) {
			if q < first {
				first = q
			}
		}
		if first != ln.path {
			continue
		}
		c.diffs = append(c.diffs, Diff{Path: ln.path, What: Hardlink,
			Detail: fmt.Sprintf("src links %s, dst links %s", groupString(sg), groupString(dg))})
	}
}

func groupString(g []string) string {
	if len(g) <= 1 {
		return "no other name"
	}
	return "[" + strings.Join(g, " ") + "]"
}

// MaxReported is how many diffs Equal lists before summarising the rest.
const MaxReported = 20

// Equal fails t (without stopping it) unless the trees at src and dst are
// equal under opt (at most one Options; none means the strict default). The
// failure lists up to MaxReported differences. It reports whether the trees
// were equal.
func Equal(t testing.TB, src, dst string, opt ...Options) bool {
	t.Helper()
	var o Options
	if len(opt) > 0 {
		o = opt[0]
	}
	diffs, err := Compare(src, dst, o)
	if err != nil {
		t.Errorf("treecmp %s %s: %v", src, dst, err)
		return false
	}
	if len(diffs) == 0 {
		return true
	}
	t.Errorf("treecmp: %s and %s differ:\n%s", src, dst, Format(diffs, MaxReported))
	return false
}

// Format renders diffs one per line, indented, at most max of them (all if
// max <= 0) followed by a count of the rest.
func Format(diffs []Diff, max int) string {
	var b strings.Builder
	for i, d := range diffs {
		if max > 0 && i == max {
			fmt.Fprintf(&b, "\t... and %d more\n", len(diffs)-max)
			break
		}
		b.WriteString("\t")
		b.WriteString(d.String())
		b.WriteString("\n")
	}
	return b.String()
}
