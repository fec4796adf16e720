package sharder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/spill"
	"github.com/bulkmove/bulkmove/model"
)

// Defaults for Options.
const (
	DefaultBatchBytes = 16 << 20
	DefaultBatchFiles = 1000
	DefaultFileCost   = 16 << 10
	DefaultLinkMem    = 1 << 16
	DefaultDirMem     = 1 << 16
)

// readDirChunk is how many names a worker reads from a directory at a time.
// Each chunk travels to the partitioner as one unit, so a directory's files
// stay together, and a huge flat directory streams out chunk by chunk.
const readDirChunk = 1024

// slowReadDirChunk is the chunk on a slow filesystem (Options.IO says so),
// where each getdents is a round trip and returns a few dozen names: a
// chunk of 1024 waits for every getdents of a directory before its first
// name goes on, and the first batch waits for the walk.
const slowReadDirChunk = 32

// Options configure Run. The zero value of each field selects its default.
type Options struct {
	// BatchBytes closes a batch when its cost (file sizes plus FileCost per
	// file) reaches it. Default 16 MiB.
	BatchBytes int64
	// BatchFiles closes a batch when it holds this many files. Default 1000.
	BatchFiles int
	// FileCost is the per-file overhead counted in a batch's cost, in bytes.
	// Default 16 KiB; a negative value means no overhead.
	FileCost int64
	// Concurrency is the number of directories read (readdir and lstat) at
	// once. Default 2*GOMAXPROCS, at least 8. On a high-latency filesystem
	// (NFS, Lustre) far more pays off.
	Concurrency int
	// Spread, if not nil, brings one value: true to cut batches from the
	// files of many directories in turn, for a destination where each
	// create is a round trip (see spread.go); false to keep a directory's
	// files together. Until it comes the walk holds up to a few thousand
	// files back; nil is false.
	Spread <-chan bool
	// Filter chooses the names to leave out, with rsync's include/exclude
	// rules; nil leaves out nothing. See the package doc.
	Filter *filter.Rules
	// IO, if set, measures the source filesystem's latency and says how
	// many names of one directory to lstat at once (see package ioconc):
	// on NFS or Lustre each lstat is a round trip to a server, and a flat
	// directory of a million files is read by many goroutines. nil: one at
	// a time (Concurrency directories at once).
	IO *ioconc.Gauge
	// OneFileSystem (-x) does not cross filesystem boundaries: a directory
	// on another device than the source (a mount point) is moved as an
	// empty directory, and its contents are not walked.
	OneFileSystem bool
	// Shard, if its Count is more than 1, restricts the walk to one of
	// Count disjoint parts of the tree (see Shard): every directory is
	// still read, but only the names the shard owns are lstat'ed and
	// reported, in batches, to Deferred, OnError and OnWarn.
	Shard Shard
	// FilesFrom, if set, replaces the walk with a list of paths relative
	// to the source directory, one a line (FilesFromNUL: NUL-separated),
	// as rsync's --files-from: each listed name is lstat'ed and reported
	// as the walk would, without recursion (a listed directory is its own
	// entry, not its contents), and each of its parent directories not
	// listed before is reported too (rsync's implied directories). See
	// filesfrom.go.
	FilesFrom    io.Reader
	FilesFromNUL bool
	// SplitSize, if positive, cuts a regular file larger than it into
	// ranges of SplitSize bytes (the last one shorter), each its own entry
	// (Entry.Off, Entry.Len) in the batches, so that several streams carry
	// one large file. Files with several names (hard links) and sparse
	// files (fewer blocks than their size) are never split. 0: no file is
	// split.
	SplitSize int64
	// LinkMem is how many hard-link sets the walk keeps open in memory
	// (an inode with several names, from its first name met until its
	// last; about 100 bytes each). Past it, every name of an inode met
	// for the first time waits, in sorted runs in a temporary file in
	// SpillDir, for the end of the walk, where the names of each inode are
	// brought together: the first as a file in a batch, the others as its
	// hard links. 0: DefaultLinkMem.
	LinkMem int
	// DirMem is how many directories still to read the walk keeps in
	// memory (their paths, about 50 bytes each): past it, the older half
	// waits in a temporary file in SpillDir (a directory of millions of
	// subdirectories costs no memory for their names). The order the
	// directories are read in is the same. 0: DefaultDirMem.
	DirMem int
	// SpillDir is where what outgrows memory goes, in a file unlinked at
	// once; "": os.TempDir().
	SpillDir string
	// Name, for a single-file src, is the name the filter sees and the
	// entry takes: the name the user gave it, where the caller followed a
	// symlink to reach the file. "": the base name of src.
	Name string

	// Deferred receives every directory (the root included, as "."),
	// symlink, device or special file asked for (Devices, Specials) and
	// second or later name of a hard-linked file.
	Deferred func(model.Entry)
	// OnError receives an error that did not stop the walk: a directory that
	// cannot be opened or read, a name that cannot be lstat'ed, a symlink
	// that cannot be read. path is relative to the source root, as in
	// Entry.Path; err is an *fs.PathError naming the operation and the full
	// path on disk.
	OnError func(path string, err error)
	// OnWarn receives the names skipped because of their type: devices
	// without Devices, sockets and FIFOs without Specials. msg says what
	// was skipped and the flag that would copy it: "skipping device (use
	// -D to copy devices)".
	OnWarn func(path string, msg string)
	// Devices (rsync's --devices) and Specials (--specials; -D is both)
	// report character and block devices, and FIFOs and sockets, as
	// Deferred entries of their kinds (model.KindCharDevice, ...; a
	// device with its number, Entry.Rdev), rather than skip them.
	Devices, Specials bool
	// MinSize and MaxSize (rsync's --min-size, --max-size) leave out the
	// regular files of fewer than MinSize bytes, and with HasMaxSize
	// those of more than MaxSize (MaxSize 0: all but empty files), every
	// name of a hard-linked one. They are not counted as Excluded: the
	// filter's rules are what --delete-excluded deletes, and these are
	// not rules.
	MinSize, MaxSize int64
	HasMaxSize       bool
	// Links (-L, --copy-unsafe-links, --safe-links): symlinks followed
	// or left out; see Links. A directory reached through a symlink is
	// walked as one: a symlink to a directory above it is walked until
	// the system refuses the path (ELOOP), as rsync's -L does.
	Links Links
	// FakeSuper (--fake-super where SRC is) reads each regular file's
	// and directory's owner, mode, and type and device number from its
	// user.rsync.%stat attribute, where it has one: a tree written by an
	// unprivileged rsync or bulkmove --fake-super is sent as what it
	// stands for (see fakeStat).
	FakeSuper bool

	hooks *testHooks
}

// testHooks let tests inject failures and observe the walk.
type testHooks struct {
	openDir  func(rel string) error // non-nil error: opening rel fails with it
	readDir  func(rel string) error // non-nil error: the next readdir of rel fails with it
	lstat    func(rel string) error // non-nil error: lstat of rel fails with it
	walkDone func()                 // called once every directory has been read
	links    func(open int)         // called at the end with the hard-link sets still open
	linkPeak func(peak int)         // called at the end with the most hard-link sets open at once
	dirPeak  func(peak int)         // called at the end with the most directories to read held in memory at once
	scopes   func(held int)         // called at the end with the directories whose filter rules are still held
}

func (o Options) withDefaults() Options {
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.BatchFiles <= 0 {
		o.BatchFiles = DefaultBatchFiles
	}
	if o.FileCost == 0 {
		o.FileCost = DefaultFileCost
	} else if o.FileCost < 0 {
		o.FileCost = 0
	}
	if o.Concurrency <= 0 {
		// Directories wait for a slow filesystem as files do.
		o.Concurrency = max(2*runtime.GOMAXPROCS(0), 8, o.IO.Limit()/2)
	}
	if o.LinkMem <= 0 {
		o.LinkMem = DefaultLinkMem
	}
	if o.DirMem <= 0 {
		o.DirMem = DefaultDirMem
	}
	if o.hooks == nil {
		o.hooks = &testHooks{}
	}
	return o
}

// Stats count what a walk found.
type Stats struct {
	Files     int64 // regular files put into batches
	Dirs      int64 // directories, the root included
	Symlinks  int64
	Hardlinks int64 // second and later names of hard-linked files
	Specials  int64 // devices, FIFOs and sockets reported (Options.Devices, Specials)
	Skipped   int64 // devices, FIFOs and sockets not asked for
	Errors    int64 // calls of OnError
	Excluded  int64 // names Filter excludes (what is under an excluded directory is not counted)
	Bytes     int64 // sum of the sizes of Files
	Batches   int64 // batches sent on out
}

// Run walks src and sends batches of its regular files on out. src is a
// directory, whose contents are walked (the root itself is the Dir entry
// "."), or a single regular file or symlink, which becomes the one entry,
// with its base name as Path (unless Filter excludes that name). Symlinks
// are never followed.
//
// Batch IDs start at 1 and increase by one in the order batches are sent.
// The send on out blocks, which bounds memory: the walk waits for the
// consumer. Run closes out when it returns, whatever the outcome.
//
// Run returns when the walk and partition are complete, or when ctx is
// cancelled (then with ctx.Err(), having stopped all its goroutines). Errors
// inside the tree go to OnError and do not stop the walk; Run returns an
// error only for an unusable src, a per-directory filter file (a dir-merge
// rule's) that cannot be read or parsed (as rsync, which stops there: the
// rules it would have added might have excluded what is left to send), or
// cancellation.
//
// Deferred, OnError and OnWarn are called from a single goroutine, one call
// at a time, and never after Run returns; a slow callback slows the walk. A
// directory's Deferred call happens before any batch holding a file under it
// is sent on out (except with FilesFrom). A hard link's Deferred call may come before the batch
// holding its first name is sent.
func Run(ctx context.Context, src string, opt Options, out chan<- *model.Batch) (Stats, error) {
	defer close(out)
	var st Stats
	opt = opt.withDefaults()
	p := newPartitioner(opt.BatchBytes, opt.BatchFiles, opt.FileCost, out)
	w := &walker{
		src:   src,
		opt:   &opt,
		links: make(map[devIno]linkFirst),
	}
	w.cond = sync.NewCond(&w.mu)

	rs, err := lstatPath(src)
	if err != nil {
		return st, fmt.Errorf("sharder: source: %w", err)
	}
	w.rootDev = rs.dev
	if opt.FilesFrom != nil && rs.typ != fs.ModeDir {
		return st, fmt.Errorf("sharder: source %s: a list of files needs a directory as the source", src)
	}
	if rs.typ != fs.ModeDir {
		// A single file, symlink or something to skip: one entry, no
		// walk. As with rsync, the filter sees it by its base name.
		w.single = true
		var c chunk
		var target string
		var lerr error
		name := filepath.Base(src)
		if opt.Name != "" {
			name = opt.Name
		}
		if !opt.Shard.Owns(name, false) {
			// Another shard's.
		} else if opt.Filter.Excluded(name, false) {
			c.excluded++
		} else {
			if rs.typ == fs.ModeSymlink {
				target, lerr = os.Readlink(src)
			}
			w.entryInto(&c, name, rs, target, lerr)
		}
		w.chunks = make(chan chunk, 1)
		w.chunks <- c
		close(w.chunks)
		err := w.collect(ctx, p, &st)
		st.Batches = p.batches
		return st, err
	}

	root, err := openDir(src, true)
	if err != nil {
		return st, fmt.Errorf("sharder: source: %w", err)
	}
	w.chunks = make(chan chunk, opt.Concurrency)
	if opt.FilesFrom != nil {
		err := w.runList(ctx, root, p, &st)
		st.Batches = p.batches
		return st, err
	}
	if opt.Shard.OwnsDir(".") {
		c := chunk{deferred: []model.Entry{rs.entry(".", model.KindDir)}}
		if opt.FakeSuper {
			if _, err := fakeStat(src, &rs); err != nil {
				c = chunk{notes: []note{{path: ".", err: err}}}
			} else {
				c.deferred[0] = rs.entry(".", model.KindDir)
			}
		}
		w.chunks <- c
	}
	// The per-directory filter files (dir-merge): each directory's are read
	// when it is, and kept while its subtree is walked.
	w.scopes, err = opt.Filter.NewScopes(filter.Tree{Root: src})
	if err != nil {
		root.Close()
		return st, fmt.Errorf("sharder: %w", err)
	}
	w.stack = spill.NewStack(opt.SpillDir, opt.DirMem, spill.StringCodec{})
	w.stack.Push(".")
	w.root = root

	g, gctx := errgroup.WithContext(ctx)
	walked := make(chan struct{})
	g.Go(func() error {
		// Wake idle workers on cancellation.
		select {
		case <-gctx.Done():
			w.stop()
		case <-walked:
		}
		return nil
	})
	g.Go(func() error {
		stopStats := w.startStats()
		var workers errgroup.Group
		for range opt.Concurrency {
			workers.Go(func() error { return w.work(gctx) })
		}
		err := workers.Wait()
		stopStats()
		close(walked)
		w.closeStack()
		if err == nil && opt.hooks.walkDone != nil {
			opt.hooks.walkDone()
		}
		if err == nil {
			err = w.sendLateLinks(gctx)
		}
		close(w.chunks)
		return err
	})
	g.Go(func() error { return w.collect(gctx, p, &st) })
	err = g.Wait()
	if h := opt.hooks.scopes; h != nil {
		h(w.scopes.Held())
	}
	w.endLinks()
	st.Batches = p.batches
	if cerr := ctx.Err(); cerr != nil {
		return st, cerr
	}
	return st, err
}

// chunk is what a worker hands the collector at once: the results of one
// readdir call (at most readDirChunk names of one directory).
type chunk struct {
	files    []model.Entry // regular files, for batches
	deferred []model.Entry // directories, symlinks, hard links
	notes    []note        // errors and warnings
	excluded int64
}

func (c *chunk) empty() bool {
	return len(c.files) == 0 && len(c.deferred) == 0 && len(c.notes) == 0 && c.excluded == 0
}

// note is an error (err != nil) or a warning for OnError or OnWarn.
type note struct {
	path string
	err  error
	warn string
}

type dirItem struct {
	rel string
	f   *os.File // already open (the root), or nil
	err error    // not a directory: the failure to read back some set aside (see pop)
}

type devIno struct{ dev, ino uint64 }

type walker struct {
	rootDev uint64 // the source's device, for OneFileSystem
	src     string
	single  bool // src is the one entry (not a directory)
	opt     *Options
	chunks  chan chunk // to the collector; bounded

	// The pending directories: a stack, so the walk goes depth first and
	// the stack stays small, but for a directory of many subdirectories:
	// past Options.DirMem, the stack keeps the older ones on disk. active
	// counts directories being read; the walk is over when both are zero.
	mu      sync.Mutex
	cond    *sync.Cond
	stack   *spill.Stack[string]
	root    *os.File // the root directory, open, until it is popped
	dirPeak int      // the most paths stack held in memory at once
	active  int
	stopped bool

	// First names of regular files with more than one link, across the
	// job, while some of their names have not been met yet: an inode is
	// forgotten once all its names have been, so the map holds the link
	// sets open at once, not every hard-linked file of the tree.
	linkMu sync.Mutex
	links  map[devIno]linkFirst
	// Once links has held Options.LinkMem sets, the names of inodes met
	// for the first time wait in late for the end of the walk (see
	// sendLateLinks); linksFull stays set, so that no inode has names both
	// there and in links.
	linksFull bool
	late      *spill.List[model.Entry]
	linkPeak  int

	// statq feeds the stat workers (nil: none; see forEachStat).
	statq chan statJob

	// scopes gives each directory the filter rules in force in it, with
	// those of the per-directory files (dir-merge) of it and above it.
	scopes *filter.Scopes
}

// linkFirst is the first name of a hard-linked file met by the walk, and
// how many of its other names have not been met yet.
type linkFirst struct {
	path string
	left uint64
}

// pop takes a directory to read; false means the walk is over or stopped.
func (w *walker) pop() (dirItem, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.stack.Len() == 0 && w.active > 0 && !w.stopped {
		w.cond.Wait()
	}
	if w.stopped || w.stack.Len() == 0 {
		return dirItem{}, false
	}
	rel, ok, err := w.stack.Pop()
	w.active++
	switch {
	case err != nil:
		return dirItem{err: err}, true
	case !ok: // cannot be: Len was not 0
		return dirItem{err: errors.New("the stack of directories to read lost count")}, true
	}
	it := dirItem{rel: rel}
	if rel == "." {
		it.f, w.root = w.root, nil
	}
	return it, true
}

func (w *walker) push(rels []string) {
	if len(rels) == 0 {
		return
	}
	w.mu.Lock()
	for _, r := range rels {
		w.stack.Push(r)
	}
	w.dirPeak = max(w.dirPeak, w.stack.InMem())
	w.mu.Unlock()
	if len(rels) == 1 {
		w.cond.Signal()
	} else {
		w.cond.Broadcast()
	}
}

func (w *walker) finished() {
	w.mu.Lock()
	w.active--
	last := w.active == 0 && w.stack.Len() == 0
	w.mu.Unlock()
	if last {
		w.cond.Broadcast()
	}
}

func (w *walker) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// closeStack releases what is left on the stack after a cancelled walk
// (the root, if it was never read) and reports the peak to the test hook.
func (w *walker) closeStack() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.root != nil {
		w.root.Close()
		w.root = nil
	}
	w.stack.Close()
	if h := w.opt.hooks.dirPeak; h != nil {
		h(w.dirPeak)
	}
}

func (w *walker) work(ctx context.Context) error {
	for {
		it, ok := w.pop()
		if !ok {
			return ctx.Err()
		}
		var err error
		if it.err != nil {
			// The directories that were in the lost part of the stack
			// are not walked: an error of the walk, as for a directory
			// that cannot be read.
			err = w.send(ctx, chunk{notes: []note{{path: ".", err: &fs.PathError{Op: "read back directories set aside", Path: w.src, Err: it.err}}}})
		} else {
			err = w.readDir(ctx, it)
		}
		w.finished()
		if err != nil {
			w.stop() // a filter file that cannot be used stops the walk
			return err
		}
	}
}

// send hands a chunk to the collector; it fails only on cancellation.
func (w *walker) send(ctx context.Context, c chunk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case w.chunks <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// full returns the path on disk of rel.
func (w *walker) full(rel string) string {
	if rel == "." {
		return w.src
	}
	return joinPath(w.src, rel)
}

func joinPath(dir, name string) string {
	if strings.HasSuffix(dir, string(filepath.Separator)) {
		return dir + name
	}
	return dir + string(filepath.Separator) + name
}

// dirent is a name read from a directory (valid until the next read of
// it), and whether it is a directory.
type dirent struct {
	name []byte
	dir  bool
}

// joinRelBytes is joinRel of a name read from a directory.
func joinRelBytes(dir string, name []byte) string {
	if dir == "." {
		return string(name)
	}
	return dir + "/" + string(name)
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// readDir reads one directory chunk by chunk, sends each chunk to the
// collector, then pushes the chunk's subdirectories. It returns an error
// only on cancellation.
func (w *walker) readDir(ctx context.Context, it dirItem) error {
	full := w.full(it.rel)
	f := it.f
	if f == nil {
		var err error
		if h := w.opt.hooks.openDir; h != nil {
			if herr := h(it.rel); herr != nil {
				err = &fs.PathError{Op: "open", Path: full, Err: herr}
			}
		}
		if err == nil {
			// A directory reached through a symlink (-L) is opened through it.
			f, err = openDir(full, w.opt.Links.Any())
		}
		if err != nil {
			w.scopes.Skip(it.rel)
			return w.send(ctx, chunk{notes: []note{{path: it.rel, err: err}}})
		}
	}
	defer f.Close()
	sc, err := w.scopes.Enter(it.rel)
	if err != nil {
		return err
	}
	defer sc.Done()
	var dr dirReader
	defer dr.close()
	owned := w.opt.Shard.OwnsDir(it.rel) // the names in it that are not directories
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var ents []dirent
		var err error
		if h := w.opt.hooks.readDir; h != nil {
			if herr := h(it.rel); herr != nil {
				err = &fs.PathError{Op: "readdirent", Path: full, Err: herr}
			}
		}
		if err == nil {
			n := readDirChunk
			if w.opt.IO.Slow() {
				n = slowReadDirChunk
			}
			ents, err = dr.read(f, n)
		}
		var c chunk
		var subdirs []string
		if len(ents) > 0 {
			c, subdirs = w.statChunk(f, it.rel, full, ents, owned, sc.Dir())
		}
		if err != nil && err != io.EOF {
			var pe *fs.PathError
			if !errors.As(err, &pe) {
				err = &fs.PathError{Op: "readdirent", Path: full, Err: err}
			}
			c.notes = append(c.notes, note{path: it.rel, err: err})
		}
		if !c.empty() {
			if serr := w.send(ctx, c); serr != nil {
				return serr
			}
		}
		// After the send: a directory's Deferred call precedes its files.
		sc.Push(len(subdirs))
		w.push(subdirs)
		if err != nil {
			return nil
		}
	}
}

// statChunk lstats the names of one readdir chunk of directory rel.
// owned says whether the shard owns rel's names that are not directories:
// those it does not own are skipped, and its subdirectories it does not own
// are only pushed, to be read, not lstat'ed.
//
// On a slow filesystem (Options.IO says so) the lstats of a chunk run from
// several goroutines at once: a flat directory of a million files is then
// not a million round trips one after the other.
func (w *walker) statChunk(f *os.File, rel, full string, ents []dirent, owned bool, rules *filter.Dir) (chunk, []string) {
	var c chunk
	if owned {
		c.files = make([]model.Entry, 0, len(ents))
	}
	var subdirs []string
	// The names to lstat, in readdir order.
	type stated struct {
		name, rel string
		rs        rawStat
		err       error
		target    string
		lerr      error
	}
	todo := make([]stated, 0, len(ents))
	for _, de := range ents {
		isDir := de.dir
		if !isDir && !owned {
			continue
		}
		// One string for the name and its path: the name is the path's end.
		crel := joinRelBytes(rel, de.name)
		name := crel[len(crel)-len(de.name):]
		mine := !isDir || w.opt.Shard.OwnsDir(crel)
		if rules.Excluded(crel, isDir) {
			if mine {
				c.excluded++
			}
			continue
		}
		if !mine {
			subdirs = append(subdirs, crel)
			continue
		}
		todo = append(todo, stated{name: name, rel: crel})
	}
	// link reads the symlink st, and follows it where Links says (-L).
	link := func(d dirHandle, st *stated) {
		st.target, st.lerr = d.readlink(st.name, st.rs.size)
		if st.lerr == nil && w.opt.Links.Follows(st.rel, st.target) {
			if rs, err := d.stat(st.name); err != nil {
				st.lerr = err
			} else {
				st.rs = rs
			}
		}
	}
	var samp ioconc.Sampler
	cerr := withDir(f, full, func(d dirHandle) {
		// One lstat a name, not a group through io_uring: the kernel runs
		// every statx of a ring on its worker threads, and each
		// completion wakes this one, a context switch that costs more
		// than the call.
		w.forEachStat(len(todo), func(k int) {
			st := &todo[k]
			if h := w.opt.hooks.lstat; h != nil {
				if herr := h(st.rel); herr != nil {
					st.err = &fs.PathError{Op: "lstat", Path: joinPath(full, st.name), Err: herr}
					return
				}
			}
			if samp.Next(w.opt.IO) > 0 {
				start := time.Now()
				st.rs, st.err = d.lstat(st.name)
				w.opt.IO.Since(start)
			} else {
				st.rs, st.err = d.lstat(st.name)
			}
			if st.err == nil && st.rs.typ == fs.ModeSymlink {
				link(d, st)
			}
		})
	})
	for k := range todo {
		st := &todo[k]
		if st.err != nil {
			c.notes = append(c.notes, note{path: st.rel, err: st.err})
			continue
		}
		if st.rs.typ == fs.ModeSymlink && st.lerr == nil && w.opt.Links.Skips(st.rel, st.target) {
			continue // --safe-links
		}
		before := len(c.deferred)
		w.entryInto(&c, st.rel, st.rs, st.target, st.lerr)
		if st.rs.typ == fs.ModeDir && len(c.deferred) > before && !(w.opt.OneFileSystem && st.rs.dev != w.rootDev) {
			subdirs = append(subdirs, st.rel)
		}
	}
	if cerr != nil {
		c.notes = append(c.notes, note{path: rel, err: &fs.PathError{Op: "readdirent", Path: full, Err: cerr}})
	}
	return c, subdirs
}

// forEachStat calls fn(k) for k in [0, n): in this goroutine while the
// filesystem is fast, and through the walk's pool of stat workers once
// Options.IO says it is slow (the pool, shared by the directories being
// read, bounds the lstats in flight and shares them fairly).
func (w *walker) forEachStat(n int, fn func(k int)) {
	k := 0
	for ; k < n && (w.statq == nil || w.opt.IO.Width() <= 1); k++ {
		fn(k)
	}
	if k == n {
		return
	}
	var wg sync.WaitGroup
	for ; k < n; k++ {
		wg.Add(1)
		w.statq <- statJob{fn: fn, k: k, wg: &wg}
	}
	wg.Wait()
}

// statJob is one lstat (fn(k)) for the walk's stat workers.
type statJob struct {
	fn func(k int)
	k  int
	wg *sync.WaitGroup
}

// startStats starts the walk's stat workers, as many as Options.IO
// allows at most; stop ends them.
func (w *walker) startStats() (stop func()) {
	if w.opt.IO == nil || w.opt.IO.Limit() <= 1 {
		return func() {}
	}
	w.statq = make(chan statJob, w.opt.IO.Limit())
	var wg sync.WaitGroup
	for range w.opt.IO.Limit() {
		wg.Go(func() {
			for j := range w.statq {
				j.fn(j.k)
				j.wg.Done()
			}
		})
	}
	return func() { close(w.statq); wg.Wait() }
}

// maxRanges bounds the ranges of a split file (the receiver's limit,
// extract.MaxRanges): a larger file gets longer ranges.
const maxRanges = 1 << 16

// entryInto classifies one lstat'ed name and adds it to c. For a symlink,
// target and lerr are the result of reading it.
func (w *walker) entryInto(c *chunk, rel string, rs rawStat, target string, lerr error) {
	if w.opt.FakeSuper {
		full := w.full(rel)
		if w.single {
			full = w.src
		}
		link, err := fakeStat(full, &rs)
		if err != nil {
			c.notes = append(c.notes, note{path: rel, err: err})
			return
		}
		if rs.typ == fs.ModeSymlink && link != "" {
			target, lerr = link, nil
		}
	}
	switch rs.typ {
	case 0:
		if rs.size < w.opt.MinSize || (w.opt.HasMaxSize && rs.size > w.opt.MaxSize) {
			return
		}
		e := rs.entry(rel, model.KindFile)
		e.Nlink = uint32(min(rs.nlink, 1<<32-1))
		if rs.nlink > 1 {
			k := devIno{rs.dev, rs.ino}
			w.linkMu.Lock()
			lf, seen := w.links[k]
			if !seen && (w.linksFull || len(w.links) >= w.opt.LinkMem) {
				w.lateLink(c, e)
				w.linkMu.Unlock()
				return
			}
			first := lf.path
			switch {
			case !seen:
				w.links[k] = linkFirst{path: rel, left: rs.nlink - 1}
				w.linkPeak = max(w.linkPeak, len(w.links))
			case lf.left <= 1:
				delete(w.links, k) // its last name
			default:
				lf.left--
				w.links[k] = lf
			}
			w.linkMu.Unlock()
			if seen {
				e.Kind = model.KindHardlink
				e.Size = 0
				e.Link = first
				c.deferred = append(c.deferred, e)
				return
			}
		}
		if n := w.opt.SplitSize; n > 0 && e.Size > n && rs.nlink <= 1 && !rs.sparse() {
			n = max(n, (e.Size+maxRanges-1)/maxRanges)
			for off := int64(0); off < e.Size; off += n {
				r := e
				r.Off, r.Len = off, min(n, e.Size-off)
				c.files = append(c.files, r)
			}
			return
		}
		c.files = append(c.files, e)
	case fs.ModeDir:
		c.deferred = append(c.deferred, rs.entry(rel, model.KindDir))
	case fs.ModeSymlink:
		if lerr != nil {
			c.notes = append(c.notes, note{path: rel, err: lerr})
			return
		}
		e := rs.entry(rel, model.KindSymlink)
		e.Link = target
		c.deferred = append(c.deferred, e)
	case fs.ModeSocket, fs.ModeNamedPipe, fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		k, asked, skip := specialKind(rs.typ, w.opt)
		if !asked {
			c.notes = append(c.notes, note{path: rel, warn: skip})
			return
		}
		e := rs.entry(rel, k)
		if k.IsDevice() {
			e.Rdev = rs.rdev
		}
		c.deferred = append(c.deferred, e)
	default:
		c.notes = append(c.notes, note{path: rel, warn: "skipping file of unknown type"})
	}
}

// specialKind is the kind of a device or special file of type typ,
// whether o asks for it, and the warning that skips it otherwise.
func specialKind(typ fs.FileMode, o *Options) (k model.Kind, asked bool, skip string) {
	switch typ {
	case fs.ModeSocket:
		return model.KindSocket, o.Specials, "skipping socket (use -D to copy special files)"
	case fs.ModeNamedPipe:
		return model.KindFIFO, o.Specials, "skipping FIFO (use -D to copy special files)"
	case fs.ModeDevice | fs.ModeCharDevice:
		return model.KindCharDevice, o.Devices, "skipping device (use -D to copy devices)"
	}
	return model.KindBlockDevice, o.Devices, "skipping device (use -D to copy devices)"
}

// lateLink sets aside e, a name of a hard-linked file whose inode has no
// open set, once the open sets have filled LinkMem; w.linkMu is held. A
// failure to write it to disk is reported as an error of that name.
func (w *walker) lateLink(c *chunk, e model.Entry) {
	w.linksFull = true
	if w.late == nil {
		w.late = spill.New(w.opt.SpillDir, 0, byInode, model.EntryCodec{})
	}
	if err := w.late.Add(e); err != nil {
		c.notes = append(c.notes, note{path: e.Path, err: &fs.PathError{Op: "set aside hard link", Path: w.full(e.Path), Err: err}})
	}
}

// byInode orders names by inode; the spill keeps equal ones in the order
// added, so the first name of an inode met comes first.
func byInode(a, b *model.Entry) int {
	if c := cmp.Compare(a.Dev, b.Dev); c != 0 {
		return c
	}
	return cmp.Compare(a.Ino, b.Ino)
}

// sendLateLinks hands the collector the names set aside by lateLink, an
// inode's together: the first as a regular file, for a batch, the others
// as hard links to it. The files go first, in one pass over the names,
// and the links in a second: a consumer that places a link by its
// target (plan) has met almost every target by then. It runs once every
// directory has been read.
func (w *walker) sendLateLinks(ctx context.Context) error {
	if w.late == nil {
		return nil
	}
	for _, links := range []bool{false, true} {
		var c chunk
		var first model.Entry
		for e, err := range w.late.All() {
			if err != nil {
				// The names not read back are not moved; a link is
				// never sent without its file.
				c.notes = append(c.notes, note{path: ".", err: &fs.PathError{Op: "read back hard links set aside", Path: w.src, Err: err}})
				return w.send(ctx, c)
			}
			switch {
			case first.Path == "" || e.Dev != first.Dev || e.Ino != first.Ino:
				first = e
				if !links {
					c.files = append(c.files, e)
				}
			case links:
				e.Kind, e.Size, e.Link = model.KindHardlink, 0, first.Path
				c.deferred = append(c.deferred, e)
			}
			if len(c.files)+len(c.deferred) >= readDirChunk {
				if err := w.send(ctx, c); err != nil {
					return err
				}
				c = chunk{}
			}
		}
		if !c.empty() {
			if err := w.send(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// endLinks releases the names set aside and reports the open sets to
// the test hooks.
func (w *walker) endLinks() {
	if w.late != nil {
		w.late.Close()
	}
	if h := w.opt.hooks.links; h != nil {
		h(len(w.links))
	}
	if h := w.opt.hooks.linkPeak; h != nil {
		h(w.linkPeak)
	}
}

func (rs *rawStat) entry(rel string, k model.Kind) model.Entry {
	e := model.Entry{
		Path:  rel,
		Kind:  k,
		Mode:  rs.perm,
		MTime: rs.mtime,
		UID:   rs.uid,
		GID:   rs.gid,
		Dev:   rs.dev,
		Ino:   rs.ino,
		CTime: rs.ctime,
	}
	if k == model.KindFile {
		e.Size = rs.size
	}
	return e
}

// collect runs in one goroutine: it calls the callbacks, counts, and feeds
// the partitioner, then flushes the last batch once the walk is over.
func (w *walker) collect(ctx context.Context, p *partitioner, st *Stats) error {
	o := w.opt
	sp := newSpreader(p, o.Spread)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var c chunk
		var ok bool
		select {
		case c, ok = <-w.chunks:
		case on := <-sp.decided():
			if err := sp.set(ctx, on); err != nil {
				return err
			}
			continue
		case <-sp.due():
			if err := sp.expire(ctx); err != nil {
				return err
			}
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			if err := sp.finish(ctx); err != nil {
				return err
			}
			return p.flush(ctx)
		}
		for _, n := range c.notes {
			if n.err != nil {
				st.Errors++
				if o.OnError != nil {
					o.OnError(n.path, n.err)
				}
			} else {
				st.Skipped++
				if o.OnWarn != nil {
					o.OnWarn(n.path, n.warn)
				}
			}
		}
		st.Excluded += c.excluded
		for _, e := range c.deferred {
			switch e.Kind {
			case model.KindDir:
				st.Dirs++
			case model.KindSymlink:
				st.Symlinks++
			case model.KindHardlink:
				st.Hardlinks++
			case model.KindCharDevice, model.KindBlockDevice, model.KindFIFO, model.KindSocket:
				st.Specials++
			}
			if o.Deferred != nil {
				o.Deferred(e)
			}
		}
		for _, e := range c.files {
			if e.Off == 0 { // a split file counts once
				st.Files++
			}
			st.Bytes += e.DataLen()
		}
		if err := sp.add(ctx, c.files); err != nil {
			return err
		}
	}
}
