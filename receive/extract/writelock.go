package extract

import (
	"sync"

	"golang.org/x/sys/unix"
)

// fileLocks take turns among this process's writers of one file: the
// ranges of a split file that several streams write into its partial at
// once. The kernel already lets one write of a file's pages in at a time
// (the inode's lock, on tmpfs, ext4 and XFS alike), and a writer waiting
// for that lock spins on its CPU for as long as the holder copies, which
// on two CPUs is the time another range could have spent reading and
// hashing. A writer waiting here sleeps instead. Writers in other
// processes (an agent restarted meanwhile) still meet at the kernel's
// lock.
type fileLocks struct {
	mu sync.Mutex
	m  map[fileID]*fileLock
}

type fileLock struct {
	sync.Mutex
	refs int
}

// hold returns the lock of fd's file, and the function that gives the
// hold back once the file is no longer written; nil if fd cannot be
// told apart (its fstat fails), and then the writes go as they come.
func (l *fileLocks) hold(fd int) (*fileLock, func()) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil, func() {}
	}
	id := fileID{uint64(st.Dev), st.Ino}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[fileID]*fileLock)
	}
	fl := l.m[id]
	if fl == nil {
		fl = &fileLock{}
		l.m[id] = fl
	}
	fl.refs++
	return fl, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if fl.refs--; fl.refs == 0 {
			delete(l.m, id)
		}
	}
}

// do runs write under the lock (a nil lock: at once).
func (fl *fileLock) do(write func() error) error {
	if fl == nil {
		return write()
	}
	fl.Lock()
	defer fl.Unlock()
	return write()
}
