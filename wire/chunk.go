package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Codecs of a batch's data, named in its Data frame. The sender chooses per
// batch (--compress); the receiver decodes whatever each batch says.
const (
	CodecNone byte = 0 // a plain tar stream follows the Data frame
	CodecZstd byte = 1 // zstd-compressed tar, in chunks (ChunkWriter)
)

// MaxChunk bounds one chunk of compressed data.
const MaxChunk = 1 << 20

// EncodeData encodes a Data payload: the batch id, then the codec unless
// it is CodecNone (a bare id, as protocol 5 wrote it).
func EncodeData(id uint64, codec byte) []byte {
	e := enc{}
	e.uvarint(id)
	if codec != CodecNone {
		e.b = append(e.b, codec)
	}
	return e.b
}

// DecodeData decodes a Data payload.
func DecodeData(p []byte) (id uint64, codec byte, err error) {
	d := dec{b: p}
	id = d.uvarint("data batch id")
	if d.err == nil && len(d.b) > 0 {
		codec = d.byte1("data codec")
		if codec != CodecZstd {
			return 0, 0, protoErr("batch %d: unknown data codec %d", id, codec)
		}
	}
	return id, codec, d.done("data frame")
}

// Compressed data is framed so that a decoder, which reads ahead, can never
// read past the end of its batch: chunks of a big-endian uint32 length
// (1..MaxChunk) and that many bytes, ended by a zero length.

// ChunkWriter frames what is written to it as chunks of W.
type ChunkWriter struct{ W io.Writer }

func (c ChunkWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := min(len(p)-n, MaxChunk)
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], uint32(k))
		if _, err := c.W.Write(h[:]); err != nil {
			return n, err
		}
		m, err := c.W.Write(p[n : n+k])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// End writes the terminator.
func (c ChunkWriter) End() error {
	_, err := c.W.Write(make([]byte, 4))
	return err
}

// ChunkReader yields the bytes of the chunks read from R, then io.EOF at
// the terminator, never reading beyond it. Input cut short is
// io.ErrUnexpectedEOF; a chunk over MaxChunk is a protocol error.
type ChunkReader struct {
	R    *bufio.Reader
	left int  // bytes left in the current chunk
	done bool // the terminator was read
	err  error
}

// Reset starts reading the chunks of another batch.
func (c *ChunkReader) Reset(r *bufio.Reader) { *c = ChunkReader{R: r} }

// Err is the error that stopped reading, if any (not io.EOF).
func (c *ChunkReader) Err() error { return c.err }

// Done reports whether the terminator was read.
func (c *ChunkReader) Done() bool { return c.done }

func (c *ChunkReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	for c.left == 0 {
		if c.done {
			return 0, io.EOF
		}
		var h [4]byte
		if _, err := io.ReadFull(c.R, h[:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			c.err = fmt.Errorf("reading a compressed chunk: %w", err)
			return 0, c.err
		}
		n := binary.BigEndian.Uint32(h[:])
		if n > MaxChunk {
			c.err = protoErr("compressed chunk of %d bytes, over the %d-byte limit", n, MaxChunk)
			return 0, c.err
		}
		c.left = int(n)
		c.done = n == 0
	}
	n, err := c.R.Read(p[:min(len(p), c.left)])
	c.left -= n
	if n == 0 && err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.err = fmt.Errorf("reading a compressed chunk: %w", err)
		return 0, c.err
	}
	return n, nil
}
