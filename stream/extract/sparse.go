package extract

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream/wire"
)

// Sparse files (--sparse) and preallocation.
//
// A sparse file arrives as its data extents alone (wire.Extent: the tar
// entry holds their bytes, its PAX record PAXSparse their map). The
// receiver writes each extent at its offset and truncates the file to the
// manifest's size: what lies between is holes, taking no space. The
// end-to-end sum covers the map and the data (wire.HashExtents).
//
// A dense file of preallocMin bytes or more that arrives over a stream is
// preallocated (fallocate) before its data: contiguous on disk, and a full
// disk is known before the first byte is written. Filesystems without
// fallocate are written as they are. A local copy is not: copy_file_range
// may share the source's blocks (reflink) and needs no space.

// PAXSparse is the PAX record of a sparse file's map (wire.FormatExtents);
// the tar entry's size is then its data bytes.
const PAXSparse = "BULKMOVE.sparse"

// preallocMin is the smallest file preallocated.
const preallocMin = 1 << 20

// tarExtra reads what travels in a regular file's tar header besides its
// data: extended attributes and a sparse map, checked against the receive
// options and the manifest's entry. nil: nothing.
func (o *Options) tarExtra(hdr *tar.Header, e *sharder.Entry) (*FileData, error) {
	if len(hdr.PAXRecords) == 0 {
		return nil, nil
	}
	xs, err := o.tarXattrs(hdr.PAXRecords)
	if err != nil {
		return nil, err
	}
	var ext []wire.Extent
	if m, ok := hdr.PAXRecords[PAXSparse]; ok {
		if !o.Sparse {
			return nil, errors.New("a sparse map sent, but sparse files were not asked for (--sparse)")
		}
		var data int64
		if ext, data, err = wire.ParseExtents(m, e.Size); err != nil {
			return nil, err
		}
		if data != hdr.Size {
			return nil, fmt.Errorf("its sparse map places %d bytes of data, its header declares %d", data, hdr.Size)
		}
	}
	if xs == nil && ext == nil {
		return nil, nil
	}
	return &FileData{Extents: ext, Xattrs: xs}, nil
}

// dense reports whether x (nil: nothing extra) is a file sent whole.
func (x *FileData) dense() bool { return x == nil || x.Extents == nil }

// dataSize is how many bytes of data arrive for a file of size bytes.
func (x *FileData) dataSize(size int64) int64 {
	if x.dense() {
		return size
	}
	return wire.DataSize(size, x.Extents)
}

// copyData writes entry e's data from in into fd: the whole file
// (preallocated if large), or, for a sparse x, each extent at its offset
// and holes up to e's size. h, if not nil, is the file's end-to-end hash,
// to which a sparse map is fed ahead of the data. n counts the data bytes
// read from in (x.dataSize when complete).
func (t *Txn) copyData(fd int, in io.Reader, x *FileData, e *sharder.Entry, h *xxh3.Hasher128) (n int64, rerr, werr error) {
	if x.dense() {
		if _, local := in.(fdSource); !local && e.Size >= preallocMin {
			if err := unix.Fallocate(fd, 0, 0, e.Size); err != nil && err != unix.EOPNOTSUPP && err != unix.ENOSYS && err != unix.EINVAL {
				return 0, nil, fmt.Errorf("preallocate: %w", err)
			}
		}
		return copyTo(fd, in, e.Size, t.r.limit)
	}
	if h != nil {
		wire.HashExtents(h, x.Extents)
	}
	for _, ext := range x.Extents {
		if _, err := unix.Seek(fd, ext.Off, io.SeekStart); err != nil {
			return n, nil, err
		}
		m, rerr, werr := copyTo(fd, in, ext.Len, t.r.limit)
		n += m
		if rerr != nil || werr != nil || m != ext.Len {
			return n, rerr, werr
		}
	}
	return n, nil, unix.Ftruncate(fd, e.Size)
}
