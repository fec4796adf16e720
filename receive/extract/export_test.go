package extract

import (
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/model"
)

// SetStaleTemp sets the age of a stale temporary file (for tests) and
// returns a function that restores it.
func SetStaleTemp(d time.Duration) (restore func()) {
	old := staleTemp
	staleTemp = d
	return func() { staleTemp = old }
}

// KnownInMem is how many hard-link targets r keeps in memory (for tests).
func KnownInMem(r *Receiver) int { return r.known.InMem() }

// KnownTables is how many tables of hard-link targets r has on disk.
func KnownTables(r *Receiver) int { return r.known.Tables() }

// LandedLen is how many placed files r remembers (for tests).
func LandedLen(r *Receiver) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.landed)
}

// ForceWalk makes receivers open directories a component at a time, as
// where openat2 is missing, and returns a function that restores it.
func ForceWalk() (restore func()) {
	old := noOpenat2.Load()
	noOpenat2.Store(true)
	return func() { noOpenat2.Store(old) }
}

// SetStaleStageFound sets a function called with the name of a staging
// directory found stale, before it is removed (for tests), and returns a
// function that restores it.
func SetStaleStageFound(f func(name string)) (restore func()) {
	old := staleStageFound
	staleStageFound = f
	return func() { staleStageFound = old }
}

// SetCanMknod sets whether receivers may make devices, as a process
// without CAP_MKNOD may not (for tests run as root), and returns a
// function that restores it.
func SetCanMknod(ok bool) (restore func()) {
	old := canMknod
	canMknod = ok
	return func() { canMknod = old }
}

// SetDeltaFree makes the block delta see free bytes at DEST (for tests)
// and returns a function that restores its statfs.
func SetDeltaFree(free int64) (restore func()) {
	old := deltaStatfs
	deltaStatfs = func(fd int, st *unix.Statfs_t) error {
		st.Bsize, st.Bavail = 1, uint64(free)
		return nil
	}
	return func() { deltaStatfs = old }
}

// MarkTorn marks the file base of the directory dir as being patched in
// place into e's version, as writeDelta does (for tests).
func MarkTorn(dir, base string, e model.Entry) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return markTorn(int(d.Fd()), base, &e)
}
