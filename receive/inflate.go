package receive

import (
	"bufio"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// inflater decompresses the batches of one agent session.
type inflater struct {
	dec   *zstd.Decoder
	cr    wire.ChunkReader
	limit int64 // decompressed bytes the batch may take
	left  int64
	err   error // the decoder's first error
	over  bool  // the data expanded past limit
}

// open returns the tar stream of a compressed batch read from br, which
// may take at most limit bytes once decompressed.
func (z *inflater) open(br *bufio.Reader, limit int64) (io.Reader, error) {
	z.cr.Reset(br)
	z.limit, z.left, z.err, z.over = limit, limit, nil, false
	if z.dec == nil {
		dec, err := zstd.NewReader(&z.cr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(wire.MaxZstdWindow), zstd.WithDecoderMaxMemory(wire.MaxZstdWindow))
		if err != nil {
			return nil, fmt.Errorf("zstd decoder: %w", err)
		}
		z.dec = dec
	} else if err := z.dec.Reset(&z.cr); err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return z, nil
}

// Read yields decompressed bytes, up to the limit.
func (z *inflater) Read(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	// One byte past the limit tells a stream that ends there from one
	// that goes on.
	n, err := z.dec.Read(p[:min(int64(len(p)), z.left+1)])
	z.left -= int64(n)
	if z.left < 0 {
		z.over = true
		z.err = fmt.Errorf("%w: compressed data expands past %d bytes, more than its files and their tar headers take: refused (a decompression bomb?)",
			wire.ErrProtocol, z.limit)
		return 0, z.err
	}
	if err != nil && err != io.EOF {
		z.err = err
	}
	return n, err
}

// finish ends a batch: after a clean tar stream (err nil) it reads the
// compressed stream to its end, which checks its checksum and that
// nothing but the end follows the tar; either way it returns the cause
// of a failure, classified: the connection's (retryable), a bomb
// (protocol error) or corrupt data.
func (z *inflater) finish(id uint64, err error) error {
	if err == nil {
		// Reading to the end checks the frame's checksum, and that
		// nothing but the end of the compressed data follows the tar.
		var b [1]byte
		n, rerr := io.ReadFull(z, b[:])
		switch {
		case n > 0:
			err = fmt.Errorf("%w: data after the end of the tar stream", wire.ErrProtocol)
		case rerr != io.EOF:
			err = rerr
		case !z.cr.Done():
			err = fmt.Errorf("%w: compressed chunks after the end of the compressed data", wire.ErrProtocol)
		}
	}
	switch {
	case err == nil:
		return nil
	case z.cr.Err() != nil:
		return fmt.Errorf("batch %s: %w", batchname.Name(id), z.cr.Err())
	case z.over:
		return fmt.Errorf("batch %s: %w", batchname.Name(id), z.err)
	case z.err != nil:
		return fmt.Errorf("batch %s: %w: %v", batchname.Name(id), wire.ErrCorrupt, z.err)
	}
	return err
}

func (z *inflater) close() {
	if z.dec != nil {
		z.dec.Close()
	}
}

// tarBound is the most a batch's tar stream may take: the needed files'
// data rounded to blocks, and per file an allowance for its headers (a
// long name twice, and the PAX records of its extended attributes and
// sparse map where the options allow them), plus the global header and the
// end marker. It is generous: it exists to stop a few bytes of compressed
// input from expanding without bound (a decompression bomb); the tar
// reader checks the rest.
func tarBound(m *wire.BatchManifest, need []bool, o *wire.ReceiveOptions) int64 {
	perFile := int64(16 << 10)
	if o != nil && (o.Xattrs || o.ACLs) {
		perFile += 2 * wire.MaxXattrBytes
	}
	n := int64(1 << 20)
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Kind != model.KindFile || i >= len(need) || !need[i] {
			continue
		}
		n += (e.Size+511)/512*512 + perFile + 2*int64(len(e.Path))
		if o != nil && o.Sparse && e.Size >= wire.SparseMin {
			n += 1 + wire.MaxExtents*2*21 // the longest map wire.ParseExtents takes
		}
	}
	return n
}
