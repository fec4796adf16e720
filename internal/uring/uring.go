// Package uring reads and writes many small files with few system calls:
// io_uring(7) queues each file's open, read (or write) and close in memory
// shared with the kernel, and one io_uring_enter(2) submits a whole group
// of them. Where a system call's entry and exit cost more than the call's
// own work (small files on a memory filesystem, a virtual machine whose
// every entry is a trap), that is most of a small file's cost.
//
// What the kernel cannot do at once it runs on worker threads of the
// process, and each completion from there wakes the caller: a context
// switch, dearer than a system call. So a stat is not queued (the kernel
// runs every statx so); a create is, with its write, which together save
// more than their switches cost.
//
// It imports nothing of bulkmove. Where the kernel has no io_uring (older
// than 5.6, off Linux, disabled by /proc/sys/kernel/io_uring_disabled or a
// seccomp filter), New fails and the caller makes the calls one by one.
package uring

import "errors"

// ErrUnavailable: this system has no usable io_uring.
var ErrUnavailable = errors.New("io_uring unavailable")

// File is one file to read whole: Dir and Name say where (Name relative
// to the open directory Dir), Flags how to open it, Size how much to read.
// Load sets the rest.
type File struct {
	Dir   int
	Name  string
	Flags int
	Size  int64
	Buf   []byte // where to read (at least Size bytes)

	// Results. Err is the first failure (of the open, the read or the
	// stat: Op says which). N is how many bytes the read gave; Stat is the
	// open descriptor's stat after the read (its Mode, Size, Mtime and
	// Ino), valid when Err is nil.
	Err  error
	Op   string
	N    int
	Stat Stat
}

// Stat is the part of fstat(2) a reader checks.
type Stat struct {
	Mode  uint32 // type and permission bits, as st_mode
	Size  int64
	Mtime int64 // Unix nanoseconds
	Ino   uint64
}

// NewFile is one file to create and write whole (Ring.Create): Name
// relative to the open directory Dir, opened with Flags (O_CREAT and
// the like) and Perm, Data written at its start.
type NewFile struct {
	Dir   int
	Name  string
	Flags int
	Perm  uint32
	Data  []byte

	// Results. Fd is the open descriptor (-1 if the open failed); N is
	// how many bytes the write wrote (it may be short); Err the first
	// failure, of the open or the write (Op says which).
	Fd  int
	N   int
	Err error
	Op  string
}
