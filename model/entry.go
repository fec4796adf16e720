package model

import (
	"io/fs"
	"time"
)

// Kind is the type of a tree entry as the wire carries it.
type Kind uint8

const (
	KindFile     Kind = 1 // regular file, with content
	KindDir      Kind = 2 // directory
	KindSymlink  Kind = 3 // symbolic link; Link is its target, verbatim
	KindHardlink Kind = 4 // another name of a regular file; Link is the first name's Path
	// Devices and special files, moved only when asked for (-D): no
	// content, a device its number (Rdev).
	KindCharDevice  Kind = 5
	KindBlockDevice Kind = 6
	KindFIFO        Kind = 7
	KindSocket      Kind = 8
)

// IsDevice reports whether k is a character or block device.
func (k Kind) IsDevice() bool { return k == KindCharDevice || k == KindBlockDevice }

// IsSpecial reports whether k is a FIFO or a socket (rsync's special
// files).
func (k Kind) IsSpecial() bool { return k == KindFIFO || k == KindSocket }

func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindDir:
		return "dir"
	case KindSymlink:
		return "symlink"
	case KindHardlink:
		return "hardlink"
	case KindCharDevice:
		return "character device"
	case KindBlockDevice:
		return "block device"
	case KindFIFO:
		return "FIFO"
	case KindSocket:
		return "socket"
	}
	return "unknown"
}

// Entry is one name in the tree.
type Entry struct {
	// Path is relative to the source root, slash-separated, never empty.
	// The root directory itself is ".".
	Path string
	Kind Kind

	// Resumed says that the sender's resume journal names the file as in
	// place from an earlier run: it is offered all the same, and only the
	// receiver's check leaves it out (under --no-quick-check too, where it
	// checks size and mtime for such a file alone).
	Resumed bool

	Mode  fs.FileMode // permission bits plus fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky
	Size  int64       // regular files only
	MTime int64       // modification time, Unix nanoseconds
	UID   uint32
	GID   uint32
	Link  string // symlink target, or the Path of a hard link's first name
	Nlink uint32 // number of names of a regular file at the source (>1: a hard-link target)
	// Rdev is a device's number (KindCharDevice, KindBlockDevice), its
	// major and minor as Mkdev puts them: the same on every system,
	// whatever its own dev_t.
	Rdev uint64

	// Dev and Ino identify the source file; they do not travel on the wire.
	Dev, Ino uint64
	// CTime is the source file's inode change time as the walk saw it
	// (Unix nanoseconds), kept at the source only: --remove-source-files
	// removes a name only while its inode is unchanged since then.
	CTime int64

	// Off and Len, when Len > 0, make a KindFile entry one range of a
	// large file split across batches (Options.SplitSize): its bytes
	// [Off, Off+Len). Size and MTime stay the whole file's, so that every
	// range names the same version of the file.
	Off, Len int64
}

// Mkdev is the Rdev of device major, minor.
func Mkdev(major, minor uint32) uint64 { return uint64(major)<<32 | uint64(minor) }

// Major and Minor are the parts of a device's Rdev.
func (e *Entry) Major() uint32 { return uint32(e.Rdev >> 32) }
func (e *Entry) Minor() uint32 { return uint32(e.Rdev) }

// IsRange reports whether e is one range of a split file.
func (e *Entry) IsRange() bool { return e.Len > 0 }

// DataOff is where in its file the bytes e carries begin: its range's
// offset, or 0.
func (e *Entry) DataOff() int64 {
	if e.Len > 0 {
		return e.Off
	}
	return 0
}

// DataLen is how many bytes of the file e carries: its range's length, or
// its size.
func (e *Entry) DataLen() int64 {
	if e.Len > 0 {
		return e.Len
	}
	return e.Size
}

// ModTime returns the modification time as a time.Time.
func (e *Entry) ModTime() time.Time { return time.Unix(0, e.MTime) }

// Batch is a unit of transfer: a set of regular files sent together and
// acknowledged together.
type Batch struct {
	ID      uint64
	Entries []Entry
	Bytes   int64 // sum of file sizes (of a split file's ranges, their lengths)
}
