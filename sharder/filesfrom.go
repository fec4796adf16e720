package sharder

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/model"
)

// A list of files (Options.FilesFrom) replaces the walk, as rsync's
// --files-from does, with rsync's defaults for it: --relative (each listed
// path keeps its directories, which are created at the destination as
// needed) and no recursion (a listed directory is its own entry, with its
// metadata, not its contents; list its files to move them, as the part
// files of a plan do).
//
// Each line is a path relative to the source directory: leading slashes are
// removed (rsync's rule), the path is cleaned ("a//b/" is "a/b"), "." is
// the source directory itself, and a path that climbs out of the source
// ("..") is an error for that line. Without FilesFromNUL, lines are
// separated by newlines, a trailing carriage return is dropped, and blank
// lines and lines starting with '#' or ';' are skipped; with it, names are
// separated by NUL bytes and taken verbatim (except the cleaning). A name
// listed twice is reported once, and the parent directories of a listed
// path that were not listed before it (rsync's implied directories) are
// reported as directories, with their metadata, once each.
//
// Memory is bounded whatever the length of the list: the list is read as a
// stream, in chunks of up to 1024 consecutive names of one directory, which
// Options.Concurrency workers lstat at once (relative to their directory,
// opened one component at a time without following symlinks, so a symlink
// in a listed path is never followed); the names already reported are
// remembered in a set of at most listSeenMax names, cleared when it is full
// (a directory may then be reported once more, which costs the receiver
// one more application of its metadata, nothing else). Unlike the walk's,
// a directory's Deferred call may come after a batch holding its files.
//
// Filter applies to listed names (not to implied directories), and Shard
// too, by the same ownership as the walk's.
const listSeenMax = 1 << 17

// listItem is one name to lstat in a directory.
type listItem struct {
	name    string
	implied bool // a parent directory of a listed path, not itself listed
}

// listJob is a run of consecutive names of one directory.
type listJob struct {
	dir   string
	items []listItem
}

// runList reads the list and lstats what it names; it returns when all
// is reported, or on cancellation, or if the list cannot be read.
func (w *walker) runList(ctx context.Context, root *os.File, p *partitioner, st *Stats) error {
	defer root.Close()
	jobs := make(chan listJob, w.opt.Concurrency)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.readList(gctx, jobs) })
	g.Go(func() error {
		var workers errgroup.Group
		for range w.opt.Concurrency {
			workers.Go(func() error { return w.listWorker(gctx, root, jobs) })
		}
		err := workers.Wait()
		if err == nil && w.opt.hooks.walkDone != nil {
			w.opt.hooks.walkDone()
		}
		if err == nil {
			err = w.sendLateLinks(gctx)
		}
		close(w.chunks)
		return err
	})
	g.Go(func() error { return w.collect(gctx, p, st) })
	err := g.Wait()
	w.endLinks()
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// cleanListed turns a line of the list into a clean relative path.
func cleanListed(s string) (string, bool) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", false
	}
	s = strings.TrimLeft(s, "/")
	if s == "" {
		return ".", true
	}
	s = path.Clean(s)
	if s == ".." || strings.HasPrefix(s, "../") {
		return "", false
	}
	return s, true
}

// readList reads the list and hands runs of names to the workers.
func (w *walker) readList(ctx context.Context, jobs chan<- listJob) error {
	defer close(jobs)
	sep := byte('\n')
	if w.opt.FilesFromNUL {
		sep = 0
	}
	br := bufio.NewReaderSize(w.opt.FilesFrom, 64<<10)
	seen := make(map[string]struct{})
	mark := func(p string) {
		if len(seen) >= listSeenMax {
			clear(seen)
		}
		seen[p] = struct{}{}
	}
	var cur listJob
	flush := func() error {
		if len(cur.items) == 0 {
			return nil
		}
		select {
		case jobs <- cur:
		case <-ctx.Done():
			return ctx.Err()
		}
		cur = listJob{}
		return nil
	}
	add := func(dir, name string, implied bool) error {
		if len(cur.items) > 0 && (cur.dir != dir || len(cur.items) >= readDirChunk) {
			if err := flush(); err != nil {
				return err
			}
		}
		cur.dir = dir
		cur.items = append(cur.items, listItem{name: name, implied: implied})
		return nil
	}
	for {
		line, rerr := br.ReadString(sep)
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("reading the list of files: %w", rerr)
		}
		s := strings.TrimSuffix(line, string(sep))
		if sep == '\n' {
			s = strings.TrimSuffix(s, "\r")
			if s != "" && (s[0] == '#' || s[0] == ';') {
				s = ""
			}
		}
		if s != "" {
			if err := w.listed(ctx, s, seen, mark, add); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return flush()
		}
	}
}

// listed queues one line of the list: its implied parents, then itself.
func (w *walker) listed(ctx context.Context, s string, seen map[string]struct{}, mark func(string), add func(dir, name string, implied bool) error) error {
	rel, ok := cleanListed(s)
	if !ok {
		err := &fs.PathError{Op: "files-from", Path: s, Err: fmt.Errorf("not a path inside the source")}
		return w.send(ctx, chunk{notes: []note{{path: s, err: err}}})
	}
	if _, dup := seen[rel]; dup {
		return nil
	}
	if rel == "." {
		mark(rel)
		return add(".", ".", false)
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		anc := rel[:i]
		if _, ok := seen[anc]; ok {
			continue
		}
		mark(anc)
		if err := add(parentDir(anc), path.Base(anc), true); err != nil {
			return err
		}
	}
	mark(rel)
	return add(parentDir(rel), path.Base(rel), false)
}

// listWorker lstats the names of each job relative to its directory.
func (w *walker) listWorker(ctx context.Context, root *os.File, jobs <-chan listJob) error {
	var cached *os.File // the directory of the last job, if not the root
	cachedDir := ""
	defer func() {
		if cached != nil {
			cached.Close()
		}
	}()
	for {
		var job listJob
		var ok bool
		select {
		case job, ok = <-jobs:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return nil
		}
		var f *os.File
		var err error
		switch {
		case job.dir == ".":
			f = root
		case job.dir == cachedDir && cached != nil:
			f = cached
		default:
			if cached != nil {
				cached.Close()
				cached, cachedDir = nil, ""
			}
			f, err = openUnder(root, w.src, job.dir)
			if err == nil {
				cached, cachedDir = f, job.dir
			}
		}
		var c chunk
		if err != nil {
			// Each listed name fails as its lstat would, with the cause
			// (the directory is missing, or a symlink, ...).
			cause := err
			if pe, ok := err.(*fs.PathError); ok {
				cause = pe.Err
			}
			for _, it := range job.items {
				if !it.implied {
					crel := joinRel(job.dir, it.name)
					c.notes = append(c.notes, note{path: crel, err: &fs.PathError{Op: "lstat", Path: w.full(crel), Err: cause}})
				}
			}
		} else {
			c = w.statList(f, job)
		}
		if !c.empty() {
			if err := w.send(ctx, c); err != nil {
				return err
			}
		}
	}
}

// statList lstats the names of one job in the open directory f.
func (w *walker) statList(f *os.File, job listJob) chunk {
	full := w.full(job.dir)
	c := chunk{files: make([]model.Entry, 0, len(job.items))}
	cerr := withDir(f, full, func(d dirHandle) {
		for _, it := range job.items {
			crel := it.name
			if job.dir != "." {
				crel = job.dir + "/" + it.name
			}
			var rs rawStat
			var err error
			if h := w.opt.hooks.lstat; h != nil {
				if herr := h(crel); herr != nil {
					err = &fs.PathError{Op: "lstat", Path: joinPath(full, it.name), Err: herr}
				}
			}
			if err == nil {
				rs, err = d.lstat(it.name)
			}
			if err != nil {
				if !it.implied {
					c.notes = append(c.notes, note{path: crel, err: err})
				}
				continue
			}
			isDir := rs.typ == fs.ModeDir
			if it.implied && !isDir {
				continue // the listed path under it fails on its own
			}
			if !w.opt.Shard.Owns(crel, isDir) {
				continue
			}
			if !it.implied && w.opt.Filter.Excluded(crel, isDir) {
				c.excluded++
				continue
			}
			var target string
			var lerr error
			if rs.typ == fs.ModeSymlink {
				target, lerr = d.readlink(it.name, rs.size)
			}
			w.entryInto(&c, crel, rs, target, lerr)
		}
	})
	if cerr != nil {
		c.notes = append(c.notes, note{path: job.dir, err: &fs.PathError{Op: "lstat", Path: full, Err: cerr}})
	}
	return c
}
