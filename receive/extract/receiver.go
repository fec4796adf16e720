package extract

// The Receiver and its Options: opening the destination root, what a
// receiver keeps across batches (caches of directories and hard-link
// targets, totals, the gauge of the destination's latency) and what it
// reports (Dir, Identity, Totals). How a batch is installed starts in
// txn.go.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/hashidx"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/wire"
)

// Receiver installs entries under one root. It is safe for concurrent use
// by several batches at once.
type Receiver struct {
	dir string
	opt Options
	// rootDir is the root open: every directory is opened beneath it,
	// with no symlink followed (see openDir).
	rootDir *os.File
	// memRoot: rootDir is on a memory filesystem of device memDev, whose
	// directories' new files get dirat's quick calls (see txnDir.sys).
	memRoot bool
	memDev  uint64

	mu sync.Mutex
	// Hard-link targets written or verified this session, by a 64-bit
	// hash of the path: up to KnownMem in memory, the rest on disk (see
	// known.go). A path whose hash collides with a known one's (2^-64 a
	// pair) would pass for known: a link to it is then made all the same
	// (still only to a regular file under the root).
	known *hashidx.Set
	dirs  map[string]bool // directories known to exist, true if this receiver made them (a cache, reset when large)
	// looked holds the directories that a quick check (Need) found to be
	// directories, with --delete (see seenDir): a cache apart from dirs,
	// whose resets cost the knowledge of what this receiver made.
	looked map[string]struct{}
	// landed holds the files placed in directories of dirs that this
	// receiver made, by a hash of the path: what Need must still look up
	// there (see needRange). Reset with dirs.
	landed map[uint64]struct{}
	// creating holds the directories a file is being created in under
	// its final name (createInPlace, on a slow filesystem).
	creating map[string]bool
	// writing holds the files written under their final names
	// (createInPlace) whose batch has not settled: there and whole, with
	// their size and mtime, yet removed again if that batch is given up
	// (a stream cut or stalled, whose batches another stream sends again).
	// Need takes none of them for up to date: the batch sent again writes
	// its own copy, which the given-up one's removal, by inode, leaves.
	// (A count: the name may be given up by one batch as another writes it.)
	writing map[string]int
	// writers take turns writing one file (the partial of a split file)
	// within this process.
	writers fileLocks
	// torn holds the files the quick check found marked as patched in
	// place and not finished (deltainplace.go), by path.
	torn sync.Map
	// orig holds, when itemizing, the attributes of the directories this
	// job has written into, as they were before (see itemize.go).
	orig map[string]dirAttrs
	// rootMade: DEST did not exist before this receiver made it.
	rootMade bool
	// missing: a dry run's DEST that is not there (openMissing): nothing
	// is looked up in rootDir, which is a directory above it.
	missing bool

	linkMode int // how unnamed temporary files are linked; see probeLink and linking
	linkOnce sync.Once
	swept    map[string]struct{} // directories cleared of stale temporaries (under mu)
	limit    *ratelimit.Bucket

	files      atomic.Int64
	bytes      atomic.Int64
	skipped    atomic.Int64
	errs       atomic.Int64
	writeNanos atomic.Int64
	fsyncNanos atomic.Int64

	// io measures the destination's latency per file operation and says
	// how many to run at once.
	io *ioconc.Gauge

	staging  stage          // see stage.go
	sweeps   sync.WaitGroup // directories being swept aside (see sweep)
	sweeping atomic.Int64

	// withdrawn holds the partials (by directory and name) of split
	// files whose sender withdrew a range (see partial.go): later ranges
	// of that version are refused rather than begin a partial again.
	withdrawn  sync.Map
	withdrawnN atomic.Int64
	// completed holds the split files this receiver completed, by
	// directory and partial name (one version of one file), with the file
	// placed: a late range of that version finds its file complete
	// whatever the check mode (see complete in partial.go).
	completed  sync.Map // string -> fileID
	completedN atomic.Int64

	bak backups      // see backup.go
	tr  *translation // owners mapped and modes changed; nil: entries as sent
}

// Options say how to install entries.
type Options struct {
	Fsync     bool // fsync files before rename and directories before the ack
	Owner     bool // chown to the entry's uid/gid (needs root)
	KeepSetid bool // keep setuid/setgid bits
	NoCheck   bool // send everything: skip the size-and-mtime quick check
	// Check is how Need decides that a file is up to date: one of the
	// wire.Check* modes ("": quick, or none with NoCheck).
	Check string
	// WriteRate, if positive, paces writing file data (bytes a second,
	// shared by all batches): gentle on a destination that serves
	// production, and how tests make the receiver the bottleneck.
	WriteRate int64
	// NamedTemps writes every file under a named temporary and renames it,
	// as where O_TMPFILE is missing (for tests of that path).
	NamedTemps bool
	// IOConcurrency is how many files a batch writes (and checks, and
	// renames) at once: 0 chooses from the measured latency of the
	// destination filesystem (one at a time on a local disk, many on NFS);
	// see package ioconc.
	IOConcurrency int
	// Xattrs, ACLs and Sparse: what the sender may send and the receiver
	// applies (see xattr.go and sparse.go).
	Xattrs, ACLs, Sparse bool
	// NoSums: the sender sends no content hashes; none are made, and
	// bodies from a Splicer go into their files by splice (splice.go).
	NoSums bool
	// Delete: the sender deletes what the source lacks (--delete), so a
	// non-empty directory in the way of a file or a symlink is removed
	// with all it holds (see inway.go).
	Delete bool
	// Itemize: each batch's ack says what was found changed of its
	// entries (see itemize.go).
	Itemize bool
	// Devices and Specials: devices, and FIFOs and sockets, are made
	// (see special.go); an entry of either kind not granted is refused.
	Devices, Specials bool
	// FakeSuper: owners, setuid/setgid bits, devices and special files
	// are recorded in user.rsync.%stat, not made (fakesuper.go).
	FakeSuper bool
	// DryRun: the receiver only answers questions (Would, Verify, a
	// prune that removes nothing), and Open does not make a DEST that is
	// not there: it is then taken as empty.
	DryRun bool
	// SyncInPlace: files found up to date are fsynced, with their
	// directories, before the ack (see syncInPlace).
	SyncInPlace bool
	// Backup, BackupDir and Suffix: what is replaced or deleted is moved
	// aside (see backup.go and wire.ReceiveOptions.Backup).
	Backup    bool
	BackupDir string
	Suffix    string
	// Update (-u) and Existing (--existing): see wire.ReceiveOptions;
	// Need and Apply leave such entries out (need.go, apply.go).
	Update, Existing bool
	// UserMap, GroupMap, ByName, Names, Chmod and ChmodUmask: how the
	// entries' owners and modes are changed before they are installed
	// (see translate.go), as the receive options say.
	UserMap, GroupMap string
	ByName, Names     bool
	Chmod             string
	ChmodUmask        uint32
	// DeltaMin: files of at least this many bytes that DEST holds with
	// another size or mtime go as a block delta (delta.go); 0: never.
	DeltaMin int64
	// InPlace: such a file is patched where it is (delta.go), not in a
	// copy beside it.
	InPlace bool
}

// FromWire converts the handshake's options as they are, for a receiver
// whose sender is trusted with all of them (a local copy); a receiver
// serving another side grants them within its Policy (Grant).
func FromWire(o *wire.ReceiveOptions) Options {
	if o == nil {
		return Options{}
	}
	// Owners can only be given away with CAP_CHOWN (root): elsewhere files
	// belong to the receiving user, as with rsync run by an ordinary user.
	// With FakeSuper nothing is given away: owners are recorded.
	return Options{Fsync: o.Fsync, Owner: o.Owner && (canChown || o.FakeSuper), FakeSuper: o.FakeSuper, KeepSetid: o.KeepSetid, NoCheck: o.Check == wire.CheckNone,
		Check: o.Check, WriteRate: o.WriteRate, IOConcurrency: o.IOConcurrency, Xattrs: o.Xattrs, ACLs: o.ACLs, Sparse: o.Sparse, NoSums: o.NoSums, Delete: o.Delete, Itemize: o.Itemize,
		Devices: o.Devices, Specials: o.Specials, DryRun: o.DryRun, SyncInPlace: o.SyncInPlace,
		Backup: o.Backup, BackupDir: o.BackupDir, Suffix: o.Suffix,
		Update: o.Update, Existing: o.Existing,
		UserMap: o.UserMap, GroupMap: o.GroupMap, ByName: o.ByName, Names: o.Names, Chmod: o.Chmod, ChmodUmask: o.ChmodUmask, DeltaMin: o.DeltaMin, InPlace: o.InPlace}
}

// check is the check mode in force.
func (o *Options) check() string {
	switch {
	case o.NoCheck:
		return wire.CheckNone
	case o.Check == "":
		return wire.CheckQuick
	}
	return o.Check
}

// valid reports an option the receiver does not know.
func (o *Options) valid() error {
	switch c := o.check(); c {
	case wire.CheckQuick, wire.CheckNone, wire.CheckSize, wire.CheckExisting, wire.CheckSum:
		return o.validBackup()
	default:
		return fmt.Errorf("unknown check mode %q (this receiver knows %s, %s, %s, %s and %s)",
			c, wire.CheckQuick, wire.CheckNone, wire.CheckSize, wire.CheckExisting, wire.CheckSum)
	}
}

// Open creates dir if needed and opens it as the receiver's root.
func Open(dir string, opt Options) (*Receiver, error) {
	if err := Supported(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := opt.valid(); err != nil {
		return nil, err
	}
	_, statErr := os.Lstat(dir)
	if opt.DryRun && errors.Is(statErr, fs.ErrNotExist) {
		return openMissing(dir, opt)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create destination: %w", err)
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open destination: %w", err)
	}
	r, err := newReceiver(d, dir, opt)
	if err == nil && errors.Is(statErr, fs.ErrNotExist) {
		r.rootMade = true
	}
	return r, err
}

// openMissing is Open of a dry run's DEST that is not there: a receiver
// that finds nothing in it (missing), on the nearest directory above it
// that is, for its free space.
func openMissing(dir string, opt Options) (*Receiver, error) {
	up := filepath.Dir(filepath.Clean(dir))
	for {
		if fi, err := os.Stat(up); err == nil && fi.IsDir() {
			break
		}
		if next := filepath.Dir(up); next != up {
			up = next
			continue
		}
		return nil, fmt.Errorf("open destination: no directory above %s", dir)
	}
	d, err := os.OpenFile(up, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open destination: %w", err)
	}
	r, err := newReceiver(d, dir, opt)
	if err == nil {
		r.rootMade, r.missing = true, true
	}
	return r, err
}

// newReceiver is a receiver working beneath the directory rootDir (which
// it then owns), named dir in messages.
func newReceiver(rootDir *os.File, dir string, opt Options) (*Receiver, error) {
	r := &Receiver{rootDir: rootDir, dir: dir, opt: opt, known: hashidx.NewSet("", KnownMem), dirs: map[string]bool{}, landed: map[uint64]struct{}{},
		limit: ratelimit.New(opt.WriteRate)}
	if err := r.compileTranslation(); err != nil {
		rootDir.Close()
		return nil, err
	}
	r.memRoot, r.memDev = dirat.OnMemory(int(rootDir.Fd()))
	// The root as it was, before this receiver made anything in it (a
	// staging directory, say).
	r.origDir(".", int(rootDir.Fd()))
	r.io = ioconc.Auto(0)
	if opt.IOConcurrency > 0 {
		r.io = ioconc.Fixed(opt.IOConcurrency)
	} else {
		r.probeLatency()
	}
	return r, nil
}

// probeLatency gives the auto gauge its first measure before any batch: a
// lookup each of a few names that do not exist, all at once (one round
// trip on a network filesystem, microseconds on a local disk). Without it
// the gauge knows nothing at the first batch, which then runs one file at
// a time: on a network filesystem, most of a small copy's time.
func (r *Receiver) probeLatency() {
	dfd := int(r.rootDir.Fd())
	var wg sync.WaitGroup
	for k := range probeLookups {
		wg.Go(func() {
			var st unix.Stat_t
			start := time.Now()
			unix.Fstatat(dfd, TempPrefix+tmpTag+".probe."+strconv.Itoa(k), &st, unix.AT_SYMLINK_NOFOLLOW)
			r.io.Since(start)
		})
	}
	wg.Wait()
}

// probeLookups is how many lookups probeLatency times: a window of the
// gauge, whose smallest counts.
const probeLookups = 8

// Close releases the destination.
func (r *Receiver) Close() error {
	r.sweeps.Wait()
	r.closeStage()
	r.closeBackups()
	r.known.Close()
	return r.rootDir.Close()
}

// Dir is the destination directory.
func (r *Receiver) Dir() string { return r.dir }

// Identity names the destination directory itself, not its path: its
// filesystem's device, its inode and, where the filesystem keeps them, its
// birth time and its inode's generation ("dev=0:45 ino=2
// born=1700000000.123456789 gen=1358831529"; an inode number can be
// reused at once, ext4's generation is drawn anew each time, and tmpfs
// keeps a birth time). A directory deleted and made anew under the same
// name, or another filesystem mounted there, has another identity (the
// sender's resume journal is bound to it: journal.Destination). "" if it
// cannot be read.
func (r *Receiver) Identity() string {
	return identity(int(r.rootDir.Fd()))
}

// Totals reports what this receiver installed so far.
func (r *Receiver) Totals() wire.Totals {
	return wire.Totals{Files: r.files.Load(), Bytes: r.bytes.Load(), Skipped: r.skipped.Load(), Errors: r.errs.Load(),
		WriteNanos: r.writeNanos.Load(), FsyncNanos: r.fsyncNanos.Load()}
}

// FreeSpace is what an unprivileged user may still write in the
// receiver's directory, in bytes (statfs f_bavail of the directory it
// holds, not of its name, which may lead elsewhere by now); 0 if unknown.
func (r *Receiver) FreeSpace() int64 {
	var st unix.Statfs_t
	if unix.Fstatfs(int(r.rootDir.Fd()), &st) != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Checksums reports whether Need compares content hashes: the sender must
// then pass each file's Sum to NeedSums.
func (r *Receiver) Checksums() bool { return r.opt.check() == wire.CheckSum }

// IOWidth is how many files to write at once now (see Options.IOConcurrency).
func (r *Receiver) IOWidth() int { return r.io.Width() }

// IOLatency is the destination's measured latency per file operation.
func (r *Receiver) IOLatency() time.Duration { return r.io.Latency() }

// Slow reports whether the destination's file operations wait on a device
// or a server (more than one at once is worth it): a sender then spreads
// each batch over many directories (sharder.Options.Spread).
func (r *Receiver) Slow() bool { return landSlow(r) }
