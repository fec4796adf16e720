package wire

import (
	"io"

	"github.com/zeebo/xxh3"
)

// Content hashes for CheckSum mode are XXH3-128: both ends hash at memory
// speed (more than 10 GB/s a core with AVX2), so the disks, not the hash,
// bound a --checksum run; 128 bits make an accidental collision between two
// versions of a file negligible. It is not a cryptographic hash, and need
// not be: the sender is the source of truth, and a hostile sender can
// write what it likes into the destination anyway.

// HashReader hashes everything r yields, reading through buf, and returns
// the sum and the number of bytes read.
func HashReader(r io.Reader, buf []byte) (Sum, int64, error) {
	h := xxh3.New128()
	var n int64
	for {
		m, err := r.Read(buf)
		if m > 0 {
			h.Write(buf[:m])
			n += int64(m)
		}
		if err == io.EOF {
			return h.Sum128().Bytes(), n, nil
		}
		if err != nil {
			return Sum{}, n, err
		}
	}
}

// HashBytes is the sum of b.
func HashBytes(b []byte) Sum { return xxh3.Hash128(b).Bytes() }

// EmptySum is the sum of an empty file.
var EmptySum = HashBytes(nil)
