package extract

// The batch transaction: Begin opens a Txn over a batch's entries; Write,
// Apply and Skip install them; Commit gives the written files their names
// (only those the sender does not discard and whose data hash to the
// sender's) and returns the batch's ack; Abort removes what was written.
// A failure is recorded against its entry (fail, Code), so that the sender
// knows which entries did not land, and why.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/dirat"
	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/internal/uring"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Txn installs one batch: files are written under temporary names, then
// Commit renames them into place. Write, Apply and Skip may be called from
// several goroutines at once for different entries (a receiver on a
// high-latency filesystem writes many files at once); Begin, Commit and
// Abort may not overlap them.
type Txn struct {
	r       *Receiver
	entries []model.Entry

	mu      sync.Mutex
	dirs    map[string]*txnDir // target directories of this batch
	pending []pendingFile
	errs    []wire.EntryError
	files   int64
	bytes   int64
	skipped int64
	// where the time went
	writeNanos, fsyncNanos int64
	// setgidDir: some target directory is setgid, so new files may not get
	// the creator's group.
	setgidDir atomic.Bool
	// xattrs are the manifest's attributes of directories and symlinks,
	// set by SetXattrs before ApplyFinal.
	xattrs [][]wire.Xattr
	// Files WriteThen places before Commit: placing counts them, placers
	// bounds them by target directory (see settle).
	placing sync.WaitGroup
	placers map[*os.File]chan struct{}
	// spread: the batch's files come from many directories, a few each
	// (see createInPlace).
	spread bool
	// items are the entries' item flags, when itemizing (itemize.go).
	items []uint16
	// inPlace are the regular files found up to date (Skip), for
	// syncInPlace.
	inPlace []int
	// aside gathers what the batch moved aside, with --backup (backup.go).
	aside *aside
	// q holds the small files read and not yet created, during
	// ExtractTar (ringwrite.go).
	q *createQueue
	// deltas are the temporaries of the files that may come as a block
	// delta (delta.go); Commit and Abort remove those not used.
	deltas *Deltas
}

type pendingFile struct {
	index  int
	dir    *os.File
	tmp    string // the temporary name, or "" for an unnamed file held by fd
	fd     int
	base   string
	sum    wire.Sum // XXH3-128 of what was written, if summed
	summed bool
	placed bool // under its final name (Commit)
	sdir   int  // the staging directory's descriptor when tmp is there (see stage.go), else 0
	held   int  // with sdir: an O_PATH descriptor of the staged file to link it from, or -1
	// settled: placed, or failed to be, before Commit (WriteThen);
	// nothing left to do for it.
	settled bool
	// part, for a range of a split file, is its partial's name; fd is
	// then the partial, open (see partial.go).
	part string
	// size is the bytes written: counted once they landed (Commit).
	size int64
	// ino, for a file written under its final name (direct), is its
	// inode: dropped, it is removed only while its name still holds it.
	// (Or fd holds the file, which tells its inode then: holdDirect.)
	ino uint64
	// sys closes fd (see dirat.Calls).
	sys dirat.Calls
	// inPlace: DEST's file patched where it is (deltainplace.go); fd
	// holds it, dir is its own handle on its directory.
	inPlace bool
}

// direct reports whether p was written under its final name (see
// createInPlace): placing it is only counting it, dropping it removes it.
// (A temporary's name carries this process's random tmpTag: an entry of
// that very name would be in place once written either way.)
func (p *pendingFile) direct() bool { return p.tmp != "" && p.tmp == p.base }

// Begin starts a batch over entries.
func (r *Receiver) Begin(entries []model.Entry) *Txn {
	t := &Txn{r: r, entries: entries, dirs: map[string]*txnDir{}, spread: landSlow(r) && spread(entries)}
	if r.opt.Itemize {
		t.items = make([]uint16, len(entries))
	}
	if r.backingUp() {
		t.aside = &aside{}
	}
	return t
}

// spread reports whether the regular files of entries take their
// directories in turn: at most one in four follows a file of its own
// directory. (Not how many directories the batch has: what the receiver
// has in flight at once is a window of the batch, and a batch taking 10
// directories in turn may hold dozens of files of each.)
func spread(entries []model.Entry) bool {
	pairs, same := 0, 0
	prev := ""
	first := true
	for i := range entries {
		if entries[i].Kind != model.KindFile {
			continue
		}
		d := parentOf(entries[i].Path)
		if !first {
			pairs++
			if d == prev {
				same++
			}
		}
		prev, first = d, false
	}
	return pairs > 0 && 4*same <= pairs
}

// Skip counts entry i as already up to date (a split file once, by its
// first range). With -u or --existing a file not sent may be one left
// out (newer at DEST, or not there), which the sender does not remove:
// none is made durable.
func (t *Txn) Skip(i int) {
	if i >= len(t.entries) || t.entries[i].Off == 0 {
		t.count(0, 0, 1)
	}
	if t.r.opt.SyncInPlace && !t.r.opt.Update && !t.r.opt.Existing && i < len(t.entries) && t.entries[i].Kind == model.KindFile {
		t.mu.Lock()
		t.inPlace = append(t.inPlace, i)
		t.mu.Unlock()
	}
}

// syncInPlace makes the files found up to date durable, each and its
// directory, as Commit makes those it writes with Fsync: the sender
// removes its copy once the ack says so (--remove-source-files), and an
// up-to-date file a run without --fsync wrote a moment ago may be in the
// page cache alone. A file no longer there as the check found it fails.
// A range of a split file whose file is not complete yet is in its
// partial, synced when the last range completes it (partial.go).
func (t *Txn) syncInPlace() {
	if len(t.inPlace) == 0 {
		return
	}
	start := time.Now()
	dirs := map[string]*os.File{}
	defer func() {
		for _, d := range dirs {
			if d != nil {
				d.Close()
			}
		}
	}()
	synced := map[string]bool{}
	for _, i := range t.inPlace {
		e := &t.entries[i]
		d, base := splitDir(e.Path)
		dir, ok := dirs[d]
		if !ok {
			dir, _ = t.r.openDir(d, 0)
			dirs[d] = dir
		}
		err := errors.New("not in place")
		if dir != nil {
			err = syncFileAt(int(dir.Fd()), base, e)
		}
		if err == unix.ENOENT && e.IsRange() {
			continue
		}
		if err == nil && !synced[d] {
			if err = dir.Sync(); err == nil {
				synced[d] = true
			}
		}
		if err != nil {
			t.failErr(i, "fsync", e.Path, err)
		}
	}
	t.fsyncNanos += int64(time.Since(start))
}

// syncFileAt fsyncs the regular file name in the directory dfd if it is
// still e's size and, where e has one, mtime.
func syncFileAt(dfd int, name string, e *model.Entry) error {
	fd, err := unix.Openat(dfd, name, readFlags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != e.Size {
		return errors.New("changed at the destination since it was checked")
	}
	return unix.Fsync(fd)
}

// count adds to the batch's totals.
func (t *Txn) count(files, bytes, skipped int64) {
	t.mu.Lock()
	t.files += files
	t.bytes += bytes
	t.skipped += skipped
	t.mu.Unlock()
}

// BeforeAck, if set, is called with each batch's id and entries once its
// files are in place (durable, with Fsync), before its ack is made: how
// tests hold an ack back.
var BeforeAck func(id uint64, entries []model.Entry)

// Commit renames the batch's files into place, except those discarded by
// the sender, syncs directories with Fsync, and returns the batch's ack.
func (t *Txn) Commit(id uint64, discards []wire.Discard) *wire.BatchAck {
	return t.CommitSums(id, discards, nil)
}

// CommitSums is Commit, given the sender's hashes of the files it sent: a
// file whose data does not hash to the sender's (corrupted on the way, or
// by a faulty disk or memory) is dropped and fails with CodeCorrupt: it
// never takes its final name, or, written under it (createInPlace), is
// removed.
func (t *Txn) CommitSums(id uint64, discards []wire.Discard, sums []wire.IndexedSum) *wire.BatchAck {
	commitStart := time.Now()
	t.placing.Wait()
	drop := map[int]string{}
	for _, d := range discards {
		drop[d.Index] = d.Reason
	}
	want := make(map[int]wire.Sum, len(sums))
	for _, s := range sums {
		want[s.Index] = s.Sum
	}
	// Linking or renaming into place is one operation per file: on a slow
	// filesystem, many at once.
	//
	// One at a time (a fast filesystem), the held descriptors of files
	// written under their names are closed together after the loop,
	// through io_uring: a group in one system call, not one each.
	width := t.r.io.Width()
	var ring *uring.Ring
	var held []*pendingFile
	later := &held
	if width <= 1 {
		ring = uring.Get()
	}
	if ring == nil {
		later = nil
	}
	ioconc.ForEach(len(t.pending), width, func(_, k int) {
		p := &t.pending[k]
		e := &t.entries[p.index]
		if p.settled {
			return // placed by WriteThen
		}
		if p.part != "" {
			// A range of a split file: see partial.go.
			switch s, ok := want[p.index]; {
			case containsKey(drop, p.index):
				t.discardRange(p)
			case ok && p.summed && s != p.sum:
				unix.Close(p.fd)
				t.fail(p.index, wire.CodeCorrupt, fmt.Errorf("receive %s: the range at %d that arrived does not hash to what the sender read (XXH3-128): not recorded", e.Path, e.Off))
			default:
				p.placed = t.commitRange(p)
			}
			p.fd = -1
			return
		}
		if p.inPlace {
			s, ok := want[p.index]
			t.commitInPlace(p, containsKey(drop, p.index), s, ok)
			return
		}
		if _, ok := drop[p.index]; ok {
			t.drop(p)
			return
		}
		if s, ok := want[p.index]; ok && p.summed && s != p.sum {
			t.drop(p)
			t.fail(p.index, wire.CodeCorrupt, fmt.Errorf("receive %s: the data that arrived does not hash to what the sender read (XXH3-128): not installed", e.Path))
			return
		}
		t.place(p, later)
	})
	t.closeHeldAll(ring, held)
	// Bytes count only what landed: a file placed, or a range recorded
	// in its partial; not one that failed or was dropped.
	failed := make(map[int]bool, len(t.errs))
	for _, e := range t.errs {
		failed[e.Index] = true
	}
	for _, p := range t.pending {
		if p.placed {
			t.files++
			if !p.inPlace {
				t.r.clearTorn(int(p.dir.Fd()), p.base, t.entries[p.index].Path)
			}
		}
		if p.placed || p.part != "" && !containsKey(drop, p.index) && !failed[p.index] {
			t.bytes += p.size
		}
	}
	t.syncInPlace()
	if t.r.opt.Fsync && len(t.pending) > 0 {
		start := time.Now()
		for name, d := range t.dirs {
			if d.f == nil {
				continue
			}
			if err := d.f.Sync(); err != nil {
				// The names are in place but not durable: report each
				// file of that directory, so the sender does not count
				// them as done (an fsync error is never retried).
				for _, p := range t.pending {
					if p.dir == d.f && p.placed {
						t.failErr(p.index, "fsync directory "+name+" of", t.entries[p.index].Path, err)
						t.files--
						t.bytes -= p.size
					}
				}
			}
		}
		t.fsyncNanos += int64(time.Since(start))
	}
	t.close()
	if BeforeAck != nil {
		BeforeAck(id, t.entries)
	}
	a := &wire.BatchAck{ID: id, Files: t.files, Bytes: t.bytes, Skipped: t.skipped, Errors: t.errs, Items: t.ackItems(),
		WriteNanos: t.writeNanos + int64(time.Since(commitStart)), FsyncNanos: t.fsyncNanos, LatencyNanos: int64(t.r.io.Latency())}
	if t.aside != nil {
		a.Backups, a.BackedUp = t.aside.paths, t.aside.n
	}
	t.r.files.Add(t.files)
	t.r.bytes.Add(t.bytes)
	t.r.skipped.Add(t.skipped)
	t.r.errs.Add(int64(len(t.errs)))
	t.r.writeNanos.Add(a.WriteNanos)
	t.r.fsyncNanos.Add(a.FsyncNanos)
	return a
}

// place gives the written file p its final name (its temporary is gone
// afterwards, whatever the outcome) and settles it.
//
// A file written under its name whose descriptor is held is, if later is
// set, left with its descriptor open once its mtime is set: appended to
// later, for closeHeldAll to close and finish.
func (t *Txn) place(p *pendingFile, later *[]*pendingFile) {
	e := &t.entries[p.index]
	dfd := int(p.dir.Fd())
	p.settled = true
	start := time.Now()
	if p.direct() {
		// Under its name since it was written; its descriptor, if held,
		// gives it its mtime (left till now: see WriteThen) and goes.
		if p.fd >= 0 {
			if err := p.sys.SetMtime(p.fd, e.MTime); err != nil {
				closeHeld(p)
				unix.Unlinkat(dfd, p.base, 0)
				t.failErr(p.index, "set metadata of", e.Path, err)
				t.r.setWriting(e.Path, false)
				return
			}
			if later != nil {
				*later = append(*later, p)
				return
			}
		}
		t.closed(p, closeHeld(p))
		return
	} else if p.tmp == "" {
		err := t.r.link(p.fd, dfd, p.base)
		if err == unix.EEXIST {
			// Replacing a file: link under a temporary name, then rename.
			tmp := t.tmpName()
			if err = t.r.link(p.fd, dfd, tmp); err == nil {
				if err = t.replace(p.dir, tmp, p.base, e.Path); err != nil {
					unix.Unlinkat(dfd, tmp, 0)
				}
			}
		}
		t.dropFile(dfd, "", p.fd)
		p.fd = -1
		if err != nil {
			t.failErr(p.index, "link into place", e.Path, err)
			return
		}
	} else if p.sdir != 0 {
		over := func(fdir int, from string, dfd int, base string) error {
			return t.r.renameOver(fdir, from, dfd, base, e.Path, t.aside)
		}
		if err := t.r.staging.placeStaged(p, dfd, over); err != nil {
			t.failErr(p.index, "link into place", e.Path, err)
			return
		}
	} else if err := t.replace(p.dir, p.tmp, p.base, e.Path); err != nil {
		unix.Unlinkat(dfd, p.tmp, 0)
		t.failErr(p.index, "rename into place", e.Path, err)
		return
	}
	t.r.io.Since(start)
	t.landed(p)
}

// landed records p, in place.
func (t *Txn) landed(p *pendingFile) {
	e := &t.entries[p.index]
	p.placed = true
	t.r.land(path.Dir(e.Path), e.Path)
	if e.Nlink > 1 {
		t.r.remember(e.Path)
	}
}

// closed finishes p, written under its name, whose held descriptor (if
// any) was closed with result err: landed, or removed and failed.
func (t *Txn) closed(p *pendingFile, err error) {
	e := &t.entries[p.index]
	defer t.r.setWriting(e.Path, false)
	if err != nil {
		unix.Unlinkat(int(p.dir.Fd()), p.base, 0)
		t.failErr(p.index, "close", e.Path, err)
		return
	}
	t.landed(p)
}

// closeHeldAll closes the held descriptors of held (place's later) through
// ring, all in a system call or a few, and finishes each file; then gives
// the ring back.
func (t *Txn) closeHeldAll(ring *uring.Ring, held []*pendingFile) {
	if ring == nil {
		return
	}
	fds, errs := make([]int, len(held)), make([]error, len(held))
	for k, p := range held {
		fds[k] = p.fd
	}
	broken := ring.CloseAll(fds, errs) != nil
	uring.Put(ring, broken)
	for k, p := range held {
		// A close the ring did not complete is left alone (never closed
		// twice): the file fails, is removed, and goes again next run.
		p.fd = -1
		tmpfilesOpen.Add(-1)
		t.closed(p, errs[k])
	}
}

// drop abandons the pending file p.
func (t *Txn) drop(p *pendingFile) {
	if p.inPlace {
		t.closeInPlace(p) // patched, still marked: the next pass finishes it
		return
	}
	if p.direct() {
		defer t.r.setWriting(t.entries[p.index].Path, false)
	}
	if p.direct() && p.fd >= 0 {
		var st unix.Stat_t
		ok := unix.Fstat(p.fd, &st) == nil
		closeHeld(p)
		if ok {
			unlinkIno(int(p.dir.Fd()), p.base, st.Ino)
			return
		}
	}
	if p.direct() && p.ino != 0 {
		unlinkIno(int(p.dir.Fd()), p.base, p.ino)
		return
	}
	dfd := int(p.dir.Fd())
	if p.sdir != 0 {
		unhold(p.held)
		p.held, dfd = -1, p.sdir
	}
	t.dropFile(dfd, p.tmp, p.fd)
}

// Abort removes the batch's temporary files.
func (t *Txn) Abort() {
	t.placing.Wait()
	for k := range t.pending {
		p := &t.pending[k]
		if p.settled {
			continue // in place already (WriteThen)
		}
		if p.part != "" {
			// What was written stays in the partial, unrecorded: the
			// range goes again.
			unix.Close(p.fd)
			continue
		}
		t.drop(p)
	}
	t.pending = nil
	t.close()
}

func (t *Txn) close() {
	t.deltas.Close()
	for _, d := range t.dirs {
		if d.f != nil {
			d.f.Close()
		}
	}
	clear(t.dirs)
}

func (t *Txn) fail(i int, code int, err error) {
	t.mu.Lock()
	t.errs = append(t.errs, wire.EntryError{Index: i, Code: code, Msg: err.Error()})
	t.mu.Unlock()
}

// Withdraw forgets the failures recorded against entry i: its sender
// withdrew it (the source changed while being read), so that it did not
// land is not the receiver's failure.
func (t *Txn) Withdraw(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = slices.DeleteFunc(t.errs, func(e wire.EntryError) bool { return e.Index == i })
}

// failErr records an OS error with the operation and path, classifying it.
func (t *Txn) failErr(i int, op, p string, err error) {
	if errors.Is(err, errInWay) {
		// What to do about it, not what was being done.
		t.fail(i, Code(err), fmt.Errorf("%s: %w", p, err))
		return
	}
	t.fail(i, Code(err), fmt.Errorf("%s %s: %w", op, p, unwrapPath(err)))
}

// unwrapPath strips the *PathError of an error whose path is a temporary
// or relative name the user would not recognise.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Code classifies a receiver-side error for the sender.
func Code(err error) int {
	var nd *notDirError
	switch {
	case errors.As(err, &nd):
		return wire.CodeInvalid
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return wire.CodeNoSpace
	case errors.Is(err, syscall.EROFS):
		return wire.CodeReadOnly
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return wire.CodePerm
	}
	return wire.CodeOther
}
