package extract

// Receiving file bodies with splice(2) from a plain TCP stream
// (--transport tcp without the end-to-end hashes).
//
// A body nobody needs to hash can go from the socket to the file inside
// the kernel: splice moves the socket's pages into a pipe and copies them
// from there into the file, one copy instead of two (into this process and
// back out). The sender says it sends no hashes (wire.ReceiveOptions.NoSums);
// otherwise every byte must be read here to be hashed, and nothing is
// spliced.

import (
	"bufio"
	"io"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/bulkmove/bulkmove/internal/zerocopy"
)

// Splicer is a stream whose next bytes the kernel can move into a file.
type Splicer interface {
	// SpliceTo moves exactly n bytes of the stream into the file fd at
	// its offset. It returns the bytes taken off the stream; rerr is a
	// failure of the stream (or its early end), werr of the file.
	SpliceTo(fd int, n int64) (taken int64, rerr, werr error)
}

// spliceMin is the smallest body spliced: below it a read and a write
// cost less than the calls splicing takes.
var spliceMin int64 = 64 << 10

// SocketReader reads a stream from a TCP socket through br, and splices
// bodies from the socket (after what br holds already).
type SocketReader struct {
	*bufio.Reader
	Raw syscall.RawConn
}

// pipes are the pipes bodies are spliced through, one per body at a time.
var pipes = sync.Pool{New: func() any {
	var p [2]int
	if err := pipe2(&p); err != nil {
		return nil
	}
	return &p
}}

// SpliceTo implements Splicer.
func (s SocketReader) SpliceTo(fd int, n int64) (taken int64, rerr, werr error) {
	for taken < n && s.Buffered() > 0 {
		b, _ := s.Peek(int(min(int64(s.Buffered()), n-taken)))
		err := writeAll(fd, b)
		s.Discard(len(b))
		taken += int64(len(b))
		if err != nil {
			return taken, nil, err
		}
	}
	if taken == n {
		return taken, nil, nil
	}
	pp, _ := pipes.Get().(*[2]int)
	if pp == nil {
		return taken, io.ErrUnexpectedEOF, nil
	}
	keep := true
	defer func() {
		if keep {
			pipes.Put(pp)
		} else {
			unix.Close(pp[0])
			unix.Close(pp[1])
		}
	}()
	for taken < n {
		var m int64
		var serr error
		err := s.Raw.Read(func(sock uintptr) bool {
			m, serr = splice(int(sock), pp[1], int(min(n-taken, 1<<20)), true)
			return serr != unix.EAGAIN
		})
		switch {
		case err != nil:
			return taken, err, nil
		case serr == unix.EINTR:
			continue
		case zerocopy.Unsupported(serr):
			return s.copyRest(fd, n, taken)
		case serr != nil:
			return taken, serr, nil
		case m <= 0:
			return taken, io.ErrUnexpectedEOF, nil
		}
		taken += m
		for m > 0 {
			k, err := splice(pp[0], fd, int(m), false)
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			if zerocopy.Unsupported(err) && k <= 0 {
				// The file takes no splice (a filesystem without the
				// kernel's support, a file opened to append): what the
				// pipe holds is written from here, and the rest of the
				// body read and written.
				if werr := drainTo(fd, pp[0], m); werr != nil {
					keep = false
					return taken, nil, werr
				}
				return s.copyRest(fd, n, taken)
			}
			if err != nil || k == 0 {
				// What the pipe still holds was taken off the stream:
				// emptied here, the pipe is closed, not reused.
				keep = false
				if err == nil {
					err = io.ErrShortWrite
				}
				return taken, nil, err
			}
			m -= k
		}
	}
	return taken, nil, nil
}

// drainTo writes the m bytes pipe holds to fd.
func drainTo(fd, pipe int, m int64) error {
	buf := make([]byte, min(m, 64<<10))
	for m > 0 {
		k, err := unix.Read(pipe, buf[:min(int64(len(buf)), m)])
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			return io.ErrShortWrite
		}
		if err := writeAll(fd, buf[:k]); err != nil {
			return err
		}
		m -= int64(k)
	}
	return nil
}

// copyRest copies the body's bytes from taken to n by read and write.
func (s SocketReader) copyRest(fd int, n, taken int64) (int64, error, error) {
	m, rerr, werr := copyTo(fd, s.Reader, n-taken, nil)
	if rerr == nil && werr == nil && m < n-taken {
		rerr = io.ErrUnexpectedEOF
	}
	return taken + m, rerr, werr
}

// canSplice says whether src's next bytes can be spliced: a Splicer, and
// for a tar entry one whose body lies bare in the stream.
func canSplice(src io.Reader) bool {
	if !spliceOK {
		return false
	}
	if t, ok := src.(*tarReader); ok {
		return t.splices()
	}
	_, ok := src.(Splicer)
	return ok
}
