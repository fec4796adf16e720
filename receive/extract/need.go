package extract

// The quick check: Need and NeedSums decide, for each entry of a
// manifest, whether the destination lacks an up-to-date copy, so that the
// sender sends only what is needed. Files are looked up a directory at a
// time (byDir), several directories at once on a slow filesystem; in
// checksum mode candidates are hashed by a small pool (sumPool). A file
// whose content is up to date but whose metadata are not is repaired in
// place (refresh, in meta.go) rather than sent again.

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/ioconc"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Need runs the quick check: for each regular file, whether the
// destination lacks an up-to-date copy. Entries of other kinds are always
// needed. Up to date depends on the check mode (Options.Check):
//   - quick: a regular file of the same size and mtime;
//   - size: a regular file of the same size (--size-only);
//   - existing: any regular file (--ignore-existing);
//   - checksum: a regular file of the same size and content hash as the
//     manifest's (NeedSums; a file without a sum is needed);
//   - none: never, but for a file the sender's resume journal names
//     (Entry.Resumed): as quick.
//
// Whatever the mode, with Options.Update a regular file newer at the
// destination (its mtime) is not needed, and with Options.Existing a
// file not there (nothing of its name) is not needed: neither is
// itemized, nor has its attributes set.
//
// In quick, size and checksum modes, a file that is up to date but has
// another mtime (size and checksum), mode or (as root) owner than the
// entry gets the entry's, without its data being sent; where that fails
// the file is needed.
func (r *Receiver) Need(entries []model.Entry) []bool { return r.NeedSums(entries, nil) }

// NeedSums is Need given the manifest's content hashes (checksum mode):
// each file of the right size is read and hashed, by up to hashWorkers at
// once.
func (r *Receiver) NeedSums(entries []model.Entry, sums []wire.Sum) []bool {
	need, _ := r.NeedItems(entries, sums)
	return need
}

// NeedItems is NeedSums, and when itemizing (Options.Itemize) the item
// flags of the batch's files (for Txn.SetItems): new, or what differed.
// A file whose data is to be sent has ItemSent.
func (r *Receiver) NeedItems(entries []model.Entry, sums []wire.Sum) (need []bool, items []uint16) {
	need = make([]bool, len(entries))
	if r.opt.Itemize {
		items = make([]uint16, len(entries))
	}
	var hashOnce sync.Once
	var hash *sumPool // started at the first file to hash
	toHash := func(j sumJob) {
		hashOnce.Do(func() { hash = r.startSums(entries, sums, need) })
		hash.jobs <- j
	}
	// A stat per file, a directory's files together (one open of each):
	// a batch's files come from several directories, in chunks that
	// interleave as the walk reads them in parallel, or in turn where the
	// batch is spread. On a slow filesystem, parts of the batch at once,
	// each holding whole directories where it can.
	order := byDir(entries)
	parts := min(r.io.Width(), (len(entries)+15)/16)
	ioconc.ForEach(parts, parts, func(_, k int) {
		r.needRange(entries, order[k*len(order)/parts:(k+1)*len(order)/parts], sums, need, items, toHash)
	})
	if hash != nil {
		hash.wait()
	}
	for i := range entries {
		// A range its partial already holds (see partial.go).
		if need[i] && entries[i].Kind == model.KindFile && entries[i].IsRange() && r.rangeLanded(&entries[i]) {
			need[i] = false
		}
		if items == nil || entries[i].Kind != model.KindFile {
			continue
		}
		switch {
		case need[i]:
			items[i] |= wire.ItemSent
		case items[i]&wire.ItemContent != 0:
			// Hashed and found the same (checksum mode): only its
			// attributes, which the hashing set right.
			items[i] &^= wire.ItemContent
		}
	}
	return need, items
}

// byDir returns the indexes of entries with each directory's together, the
// directories in the order they first come, each one's entries in theirs.
func byDir(entries []model.Entry) []int {
	groups := map[string]int{} // a directory's number, in order of coming
	of := make([]int, len(entries))
	for i := range entries {
		d := parentOf(entries[i].Path)
		g, ok := groups[d]
		if !ok {
			g = len(groups)
			groups[d] = g
		}
		of[i] = g
	}
	if len(groups) <= 1 {
		for i := range of {
			of[i] = i
		}
		return of
	}
	start := make([]int, len(groups)+1) // where each directory's run begins
	for _, g := range of {
		start[g+1]++
	}
	for g := range len(groups) {
		start[g+1] += start[g]
	}
	order := make([]int, len(entries))
	for i, g := range of {
		order[start[g]] = i
		start[g]++
	}
	return order
}

// needRange is NeedSums for the entries at the indexes idx.
func (r *Receiver) needRange(entries []model.Entry, idx []int, sums []wire.Sum, need []bool, items []uint16, toHash func(sumJob)) {
	item := func(i int, f uint16) {
		if items != nil {
			items[i] |= f
		}
	}
	mode := r.opt.check()
	// -u and --existing look at DEST whatever the mode: a file newer
	// there, or not there, is left out (not needed, not itemized).
	update, existing := r.opt.Update, r.opt.Existing
	absent := func(i int) {
		if existing {
			need[i] = false
			return
		}
		item(i, wire.ItemNew)
	}
	var cur *os.File // the directory of the previous entry, nil if missing
	curDir := "\x00"
	opened, made := false, false // cur: opened yet; made by this receiver
	slow := landSlow(r)          // lookups cost round trips: see landSlow
	lookups := 0
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	for _, i := range idx {
		e := &entries[i]
		need[i] = true
		m := mode
		if m == wire.CheckNone && e.Resumed {
			m = wire.CheckQuick // the sender's journal says it landed: DEST confirms
		}
		if e.Kind != model.KindFile || m == wire.CheckNone && !update && !existing || CheckName(e.Path, e.Kind) != nil {
			continue
		}
		d, base := splitDir(e.Path)
		if d != curDir {
			// One open per directory: idx keeps a directory's files together.
			if cur != nil {
				cur.Close()
			}
			curDir, cur, opened, made = d, nil, false, r.made(d)
		}
		// A directory this receiver made was empty then: a file it has
		// not placed there since is not there, and needed without a
		// lookup (on a slow filesystem a round trip a file, under the
		// directory's lock that the commits of other batches hold to link
		// theirs in).
		if made && slow && !e.IsRange() && !r.placed(e.Path) {
			absent(i)
			continue
		}
		if r.isWriting(e.Path) {
			item(i, wire.ItemNew)
			continue // there, but given up again if its batch is (Receiver.writing)
		}
		if !opened {
			opened = true
			if f, err := r.openDir(d, 0); err == nil {
				cur = f
				r.lookedAt(d)
			}
		}
		if cur == nil {
			absent(i) // its directory is not there
			continue
		}
		var st unix.Stat_t
		// One lookup in eight feeds the latency gauge: a sample shows a
		// slow filesystem as well, without two clock reads and the
		// gauge's lock for every file of a pass that finds them all in
		// place.
		timed := lookups%8 == 0
		lookups++
		var start time.Time
		if timed {
			start = time.Now()
		}
		if err := r.lstatAt(int(cur.Fd()), base, &st); err != nil {
			absent(i)
			continue
		}
		if timed {
			r.io.Since(start)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			item(i, wire.ItemNew) // another kind in its place: replaced, whatever -u and --existing
			continue
		}
		if (st.Size >= inPlaceMin || e.Size >= inPlaceMin) && r.tornAt(int(cur.Fd()), base, e.Path) {
			// A patch in place left unfinished: its size and mtime say
			// nothing (deltainplace.go), and -u must not keep it.
			item(i, wire.ItemSize|wire.ItemTime)
			continue
		}
		if update && newerAtDest(&st, e) {
			need[i] = false // newer at DEST: left as it is, attributes too, as rsync -u
			continue
		}
		if m == wire.CheckNone {
			continue // (looked at for -u or --existing)
		}
		if items != nil && m != wire.CheckExisting {
			// What differs (for a file up to date, what its refresh
			// below sets right); its size, and (checksum) its content,
			// if they decide it is sent.
			items[i] |= r.attrItems(&st, e)
			if st.Size != e.Size {
				items[i] |= wire.ItemSize
			} else if m == wire.CheckSum {
				items[i] |= wire.ItemContent
			}
		}
		switch m {
		case wire.CheckQuick:
			// Up to date in content: its mode and owner are made the
			// entry's as rsync -a makes them (no call where they agree).
			if st.Size != e.Size || st.Mtim.Nano() != e.MTime || !r.refreshAt(int(cur.Fd()), base, &st, e) {
				continue
			}
		case wire.CheckSize:
			if st.Size != e.Size || !r.refreshAt(int(cur.Fd()), base, &st, e) {
				continue
			}
		case wire.CheckSum:
			if st.Size != e.Size || i >= len(sums) || sums[i] == (wire.Sum{}) {
				continue
			}
			if e.Size == 0 {
				if sums[i] != wire.EmptySum || !r.refreshAt(int(cur.Fd()), base, &st, e) {
					continue
				}
				break
			}
			fd, err := unix.Openat(int(cur.Fd()), base, readFlags, 0)
			if err != nil {
				continue // unreadable: needed
			}
			toHash(sumJob{i, fd})
			continue
		}
		need[i] = false
		if e.Nlink > 1 {
			r.remember(e.Path)
		}
	}
}

// newerAtDest reports whether st, at DEST, is newer than e for -u: its
// mtime in a later second, as rsync compares them (its --modify-window
// 0); within one second, the quick check decides.
func newerAtDest(st *unix.Stat_t, e *model.Entry) bool {
	const s = int64(time.Second)
	return floorDiv(st.Mtim.Nano(), s) > floorDiv(e.MTime, s)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// hashWorkers bounds the files of one batch hashed at once: a few, as
// every stream runs its own batch.
const hashWorkers = 4

// readFlags open a destination file to hash it or fix its metadata: never
// through a symlink, and never blocking on a FIFO swapped in.
const readFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

type sumJob struct{ i, fd int }

// sumPool hashes a batch's candidate files and clears need for those whose
// content is the sender's. The channel is unbuffered, so at most
// hashWorkers + 1 of them are open at once.
type sumPool struct {
	jobs chan sumJob
	wg   sync.WaitGroup
}

func (r *Receiver) startSums(entries []model.Entry, sums []wire.Sum, need []bool) *sumPool {
	p := &sumPool{jobs: make(chan sumJob)}
	for range hashWorkers {
		p.wg.Go(func() {
			bp := bufPool.Get().(*[]byte)
			defer bufPool.Put(bp)
			for j := range p.jobs {
				e := &entries[j.i]
				if r.sameSum(j.fd, e, sums[j.i], *bp) {
					need[j.i] = false
					if e.Nlink > 1 {
						r.remember(e.Path)
					}
				}
			}
		})
	}
	return p
}

func (p *sumPool) wait() {
	close(p.jobs)
	p.wg.Wait()
}

// sameSum reports whether the open file fd has e's size and content sum,
// and then brings its metadata in line with e. It closes fd.
func (r *Receiver) sameSum(fd int, e *model.Entry, sum wire.Sum, buf []byte) bool {
	defer unix.Close(fd)
	var st unix.Stat_t
	if r.fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != e.Size {
		return false
	}
	got, n, err := wire.HashReader(fdReader(fd), buf)
	if err != nil || n != e.Size || got != sum {
		return false
	}
	return r.refresh(fd, &st, e) == nil
}

// fdReader reads a bare descriptor.
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}
