package extract

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// Sparse files (--sparse) and preallocation.
//
// A sparse file arrives as its data extents alone (wire.Extent: the tar
// entry holds their bytes, its PAX record wire.PAXSparse their map). The
// receiver writes each extent at its offset and truncates the file to the
// manifest's size: what lies between is holes, taking no space. The
// end-to-end sum covers the map and the data (wire.HashExtents).
//
// A dense file of preallocMin bytes or more that arrives over a stream is
// preallocated (fallocate) as its data arrive, preallocAhead at a time
// ahead of them: contiguous on disk, and a full disk known before the
// bytes that would not fit are written, while a peer that declares a huge
// file and sends little reserves little. Filesystems without fallocate are
// written as they are. A local copy is not preallocated: copy_file_range
// may share the source's blocks (reflink) and needs no space.

// preallocMin is the smallest file preallocated.
const preallocMin = 1 << 20

// preallocAhead is how far preallocation runs ahead of the data that
// arrived.
const preallocAhead = 8 << 20

// copyAllocated is copyTo for n bytes that land at offset off of fd (its
// position), preallocated a step of preallocAhead at a time, each before
// its bytes are read.
func copyAllocated(fd int, src io.Reader, off, n int64, lim *ratelimit.Bucket) (written int64, rerr, werr error) {
	for written < n {
		step := min(preallocAhead, n-written)
		if err := fallocate(fd, off+written, step); err != nil {
			if err == unix.EOPNOTSUPP || err == unix.ENOSYS || err == unix.EINVAL {
				m, rerr, werr := copyTo(fd, src, n-written, lim) // not here: written as it comes
				return written + m, rerr, werr
			}
			return written, nil, fmt.Errorf("preallocate: %w", err)
		}
		m, rerr, werr := copyTo(fd, src, step, lim)
		written += m
		if rerr != nil || werr != nil || m != step {
			return written, rerr, werr
		}
	}
	return written, nil, nil
}

// tarExtra reads what travels in a regular file's tar header besides its
// data: extended attributes and a sparse map, checked against the receive
// options and the manifest's entry. nil: nothing.
func (o *Options) tarExtra(hdr *tar.Header, e *model.Entry) (*FileData, error) {
	if len(hdr.PAXRecords) == 0 {
		return nil, nil
	}
	xs, err := o.tarXattrs(hdr.PAXRecords)
	if err != nil {
		return nil, err
	}
	var ext []wire.Extent
	if m, ok := hdr.PAXRecords[wire.PAXSparse]; ok {
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
func (x *FileData) dense() bool { return x == nil || x.Extents == nil && x.Delta == nil }

// dataSize is how many bytes of data arrive for a file of size bytes.
func (x *FileData) dataSize(size int64) int64 {
	switch {
	case x.dense():
		return size
	case x.Delta != nil:
		return wire.DataSize(size, x.Delta)
	}
	return wire.DataSize(size, x.Extents)
}

// copyData writes entry e's data from in into fd: the whole file
// (preallocated if large), or, for a sparse x, each extent at its offset
// and holes up to e's size. h, if not nil, is the file's end-to-end hash,
// to which a sparse map is fed ahead of the data. n counts the data bytes
// read from in (x.dataSize when complete).
func (t *Txn) copyData(fd int, in io.Reader, x *FileData, e *model.Entry, h *xxh3.Hasher128) (n int64, rerr, werr error) {
	if x.dense() {
		if _, local := in.(fdSource); !local && e.Size >= preallocMin {
			return copyAllocated(fd, in, 0, e.Size, t.r.limit)
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
