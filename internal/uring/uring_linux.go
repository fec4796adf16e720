package uring

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's interface (include/uapi/linux/io_uring.h).
const (
	opOpenat = 18
	opClose  = 19
	opRead   = 22
	opWrite  = 23

	setupCoopTaskrun = 1 << 8
	featSingleMmap   = 1 << 0

	offSQRing = 0
	offSQEs   = 0x10000000

	enterGetevents = 1 << 0

	registerIOWQMaxWorkers = 19
	maxWorkers             = 4
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64 // also addr2
	addr     uint64
	len      uint32
	opFlags  uint32 // open_flags, rw_flags, statx_flags
	userData uint64
	bufIndex uint16
	persona  uint16
	fileIdx  int32
	addr3    uint64
	_        uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Ring is one io_uring instance. One goroutine uses it at a time.
type Ring struct {
	fd      int
	ring    []byte // the submission and completion rings, one mapping
	sqeMem  []byte
	sqes    []sqe
	entries uint32

	sqTail, sqMask *uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []cqe

	// Per call, reused: the names as C strings, where each starts, the
	// descriptors.
	names  []byte
	offs   []int
	fds    []int32
	queued []int // Create: the files whose write is queued
}

// New sets up a ring of entries submission slots (a power of two: how
// many files one system call takes at most).
func New(entries int) (*Ring, error) {
	var p params
	p.flags = setupCoopTaskrun
	fd, errno := setup(uint32(entries), &p)
	if errno == unix.EINVAL { // before 5.19: no COOP_TASKRUN
		p = params{}
		fd, errno = setup(uint32(entries), &p)
	}
	if errno != 0 {
		return nil, fmt.Errorf("%w: io_uring_setup: %v", ErrUnavailable, errno)
	}
	r := &Ring{fd: fd, entries: p.sqEntries}
	if p.features&featSingleMmap == 0 { // before 5.4: not worth a second mapping
		unix.Close(fd)
		return nil, fmt.Errorf("%w: no single mapping", ErrUnavailable)
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	var err error
	if r.ring, err = unix.Mmap(fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: mmap: %v", ErrUnavailable, err)
	}
	if r.sqeMem, err = unix.Mmap(fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		unix.Munmap(r.ring)
		unix.Close(fd)
		return nil, fmt.Errorf("%w: mmap: %v", ErrUnavailable, err)
	}
	base := unsafe.Pointer(&r.ring[0])
	at := func(off uint32) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
	r.sqTail, r.sqMask = at(p.sqOff.tail), at(p.sqOff.ringMask)
	r.cqHead, r.cqTail, r.cqMask = at(p.cqOff.head), at(p.cqOff.tail), *at(p.cqOff.ringMask)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Add(base, p.cqOff.cqes)), p.cqEntries)
	// What the kernel cannot do at once (an open on a filesystem that
	// blocks, every create) it hands to worker threads, as many as there are
	// requests by default: a few are plenty for one stream's group, and a
	// slow filesystem is read ahead by the caller's pool, not through here.
	// (Before 5.15 the kernel has no such bound; the ring works without.)
	workers := [2]uint32{maxWorkers, maxWorkers}
	syscall.RawSyscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), registerIOWQMaxWorkers, uintptr(unsafe.Pointer(&workers)), 2, 0, 0)
	// The array between the ring and the entries: slot i is entry i, for ever.
	arr := unsafe.Slice((*uint32)(unsafe.Add(base, p.sqOff.array)), p.sqEntries)
	for i := range arr {
		arr[i] = uint32(i)
	}
	return r, nil
}

func setup(entries uint32, p *params) (int, syscall.Errno) {
	fd, _, errno := syscall.RawSyscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	return int(fd), errno
}

// Close releases the ring.
func (r *Ring) Close() error {
	if r == nil || r.fd < 0 {
		return nil
	}
	unix.Munmap(r.sqeMem)
	unix.Munmap(r.ring)
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// push queues one entry; the caller has made sure there is room.
func (r *Ring) push(e sqe) {
	tail := atomic.LoadUint32(r.sqTail)
	r.sqes[tail&*r.sqMask] = e
	atomic.StoreUint32(r.sqTail, tail+1)
}

// submit hands n queued entries to the kernel and waits for n completions,
// passing each to done.
func (r *Ring) submit(n int, done func(c cqe)) error {
	toSubmit, got := n, 0
	for got < n {
		flags := uintptr(0)
		if ready := int(atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)); ready == 0 || toSubmit > 0 {
			flags = enterGetevents
		}
		if toSubmit > 0 || flags != 0 {
			k, _, errno := syscall.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(n-got), flags, 0, 0)
			switch {
			case errno == unix.EINTR || errno == unix.EAGAIN || errno == unix.EBUSY:
			case errno != 0:
				return fmt.Errorf("io_uring_enter: %w", errno)
			default:
				toSubmit -= int(k)
			}
		}
		head, tail := atomic.LoadUint32(r.cqHead), atomic.LoadUint32(r.cqTail)
		for ; head != tail; head++ {
			done(r.cqes[head&r.cqMask])
			got++
		}
		atomic.StoreUint32(r.cqHead, head)
	}
	return nil
}

// Load opens, reads, stats (the open descriptor, after the read) and
// closes each of files: the opens of a group in one system call, the
// reads in a second, an fstat each, the closes in a third. A file's
// failure is its own (File.Err); an error returned means the ring failed
// and the files' results are not to be trusted (their descriptors are
// closed).
//
// The stat is a call of its own, not a statx through the ring: the kernel
// runs every statx on its worker threads, and each completion from there
// wakes the caller, a context switch a file that costs more than the
// call it saves.
func (r *Ring) Load(files []File) error {
	per := int(r.entries)
	for len(files) > 0 {
		n := min(len(files), per)
		if err := r.load(files[:n]); err != nil {
			return err
		}
		files = files[n:]
	}
	return nil
}

// grow returns s with room for n elements, s itself if it has it.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s
}

func (r *Ring) load(files []File) error {
	// The names as C strings, in one buffer that does not move while the
	// kernel reads them.
	size := 0
	for i := range files {
		size += len(files[i].Name) + 1
	}
	if cap(r.names) < size {
		r.names = make([]byte, 0, size)
	}
	buf := r.names[:0]
	n := len(files)
	r.offs, r.fds = grow(r.offs, n), grow(r.fds, n)
	offs, fds := r.offs[:n], r.fds[:n]
	for i := range files {
		f := &files[i]
		f.Err, f.Op, f.N, f.Stat = nil, "", 0, Stat{}
		fds[i] = -1 // (not a descriptor of an earlier call's, if the ring fails)
		offs[i] = len(buf)
		buf = append(buf, f.Name...)
		buf = append(buf, 0)
	}
	r.names = buf
	for i := range files {
		f := &files[i]
		r.push(sqe{opcode: opOpenat, fd: int32(f.Dir), addr: uint64(uintptr(unsafe.Pointer(&buf[offs[i]]))), opFlags: uint32(f.Flags), userData: uint64(i)})
	}
	err := r.submit(n, func(c cqe) {
		i := int(c.userData)
		fds[i] = c.res
		if c.res < 0 {
			files[i].Err, files[i].Op = syscall.Errno(-c.res), "open"
		}
	})
	// From here every descriptor opened is closed, whatever fails; but
	// once the closes are queued, none is closed again: a close the ring
	// may have made and not reported would close whatever file took its
	// number meanwhile. (A ring that fails there leaks them instead.)
	closing := false
	defer func() {
		if closing {
			return
		}
		for i := range files {
			if fds[i] >= 0 {
				unix.Close(int(fds[i]))
			}
		}
	}()
	if err != nil {
		return err
	}
	queued := 0
	for i := range files {
		f := &files[i]
		if f.Err != nil {
			continue
		}
		var addr uint64
		if f.Size > 0 {
			addr = uint64(uintptr(unsafe.Pointer(&f.Buf[0])))
		}
		r.push(sqe{opcode: opRead, fd: fds[i], addr: addr, len: uint32(f.Size), userData: uint64(i)})
		queued++
	}
	if err := r.submit(queued, func(c cqe) {
		f := &files[c.userData]
		if c.res < 0 {
			f.Err, f.Op = syscall.Errno(-c.res), "read"
			return
		}
		f.N = int(c.res)
	}); err != nil {
		return err
	}
	queued = 0
	var st unix.Stat_t
	for i := range files {
		f := &files[i]
		if fds[i] < 0 {
			continue
		}
		if f.Err == nil {
			if err := unix.Fstat(int(fds[i]), &st); err != nil {
				f.Err, f.Op = err, "stat"
			} else {
				f.Stat = Stat{Mode: uint32(st.Mode), Size: int64(st.Size), Mtime: int64(st.Mtim.Sec)*1e9 + int64(st.Mtim.Nsec), Ino: uint64(st.Ino)}
			}
		}
		r.push(sqe{opcode: opClose, fd: fds[i], userData: uint64(i)})
		queued++
	}
	closing = true
	return r.submit(queued, func(cqe) {})
}

// Create creates and writes each of files: the opens of up to the ring's
// entries files in one system call, then the writes of those opened in
// another. A file's failure is its own (NewFile.Err, Op); its descriptor
// is left open for the caller (NewFile.Fd, -1 where the open failed), as
// is the file, whatever the write did. An error returned means the ring
// failed: the files whose open completed have their descriptors in Fd,
// any other may or may not have been created (never written).
func (r *Ring) Create(files []NewFile) error {
	for k := range files {
		files[k].Fd, files[k].N, files[k].Err, files[k].Op = -1, 0, nil, ""
	}
	per := int(r.entries)
	for len(files) > 0 {
		n := min(len(files), per)
		if err := r.create(files[:n]); err != nil {
			return err
		}
		files = files[n:]
	}
	return nil
}

func (r *Ring) create(files []NewFile) error {
	size := 0
	for i := range files {
		size += len(files[i].Name) + 1
	}
	if cap(r.names) < size {
		r.names = make([]byte, 0, size)
	}
	r.offs = grow(r.offs, len(files))
	buf, offs := r.names[:0], r.offs[:len(files)]
	for i := range files {
		offs[i] = len(buf)
		buf = append(buf, files[i].Name...)
		buf = append(buf, 0)
	}
	r.names = buf
	for i := range files {
		f := &files[i]
		r.push(sqe{opcode: opOpenat, fd: int32(f.Dir), addr: uint64(uintptr(unsafe.Pointer(&buf[offs[i]]))),
			opFlags: uint32(f.Flags), len: f.Perm, userData: uint64(i)})
	}
	if err := r.submit(len(files), func(c cqe) {
		f := &files[c.userData]
		if c.res < 0 {
			f.Err, f.Op = syscall.Errno(-c.res), "open"
			return
		}
		f.Fd = int(c.res)
	}); err != nil {
		return err
	}
	r.queued = r.queued[:0]
	for i := range files {
		f := &files[i]
		if f.Fd < 0 || len(f.Data) == 0 {
			continue
		}
		r.push(sqe{opcode: opWrite, fd: int32(f.Fd), addr: uint64(uintptr(unsafe.Pointer(&f.Data[0]))), len: uint32(len(f.Data)), userData: uint64(i)})
		r.queued = append(r.queued, i)
	}
	err := r.submit(len(r.queued), func(c cqe) {
		f := &files[c.userData]
		if c.res < 0 {
			f.Err, f.Op = syscall.Errno(-c.res), "write"
			return
		}
		f.N = int(c.res)
	})
	if err != nil {
		for _, i := range r.queued {
			files[i].N, files[i].Err, files[i].Op = 0, ErrUnavailable, "write"
		}
	}
	return err
}

// Entries is the size of the rings Get hands out: how many files one of
// their calls takes at most.
const Entries = 128

// pool holds rings between uses (a ring is a descriptor and two mappings:
// set up once per stream or walker, not per batch or directory).
var pool = struct {
	sync.Mutex
	free []*Ring
	off  bool // io_uring unusable here: not asked again
}{}

// Get returns a ring of Entries entries, or nil where io_uring cannot be
// used (then the caller makes its calls one by one). Give it back with Put.
func Get() *Ring {
	pool.Lock()
	defer pool.Unlock()
	if n := len(pool.free); n > 0 {
		r := pool.free[n-1]
		pool.free = pool.free[:n-1]
		return r
	}
	if pool.off {
		return nil
	}
	r, err := New(Entries)
	if err != nil {
		pool.off = true
		return nil
	}
	return r
}

// Put gives back a ring from Get; broken says it failed (it is closed).
func Put(r *Ring, broken bool) {
	if r == nil {
		return
	}
	pool.Lock()
	defer pool.Unlock()
	if broken || len(pool.free) >= 16 {
		r.Close()
		return
	}
	pool.free = append(pool.free, r)
}

// CloseAll closes each of fds, a group in one system call, with each one's
// failure in errs (as long as fds). An error returned means the ring
// failed: the descriptors whose close did not complete have ErrUnavailable
// in errs and may still be open (never closed twice: the caller leaves
// them).
func (r *Ring) CloseAll(fds []int, errs []error) error {
	per := int(r.entries)
	for k := range errs {
		errs[k] = ErrUnavailable
	}
	for len(fds) > 0 {
		n := min(len(fds), per)
		for i, fd := range fds[:n] {
			r.push(sqe{opcode: opClose, fd: int32(fd), userData: uint64(i)})
		}
		done := errs[:n]
		if err := r.submit(n, func(c cqe) {
			done[c.userData] = nil
			if c.res < 0 {
				done[c.userData] = syscall.Errno(-c.res)
			}
		}); err != nil {
			return err
		}
		fds, errs = fds[n:], errs[n:]
	}
	return nil
}
