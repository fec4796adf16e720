// Package wire is bulkmove's framing between a sender and a receiver agent:
// frames for the handshake, batch manifests, the receiver's answer of which
// files it needs, commits, acknowledgements and the final summary. File data
// itself travels between a Data frame and the next frame as a plain tar stream
// (see package stream), so a captured batch can be read with `tar -tv`.
//
// A frame is one type byte, a big-endian uint32 payload length and the
// payload. Every length and count read from the wire is bounds-checked
// against the limits below before anything is allocated for it.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Proto is the protocol version. Peers with different versions refuse each
// other in the handshake with an error naming both versions.
// 3: check modes size, existing and checksum, and content hashes in
// manifests (an older agent would take an unknown mode for "quick").
// 6: extended attributes and ACLs (manifest entries of directories and
// symlinks, SCHILY.xattr PAX records of files) and sparse files (the
// BULKMOVE.sparse PAX record), asked for in the receive options.
// 7: a Data frame may name a codec: zstd-compressed data in chunks (see
// ChunkWriter); an older agent would take the compressed bytes for tar.
// 8: ranges of split files (the manifest's kindHasRange, the
// BULKMOVE.range PAX record); an older agent would take a range for the
// whole file.
// 9: a prune request may continue in the next (PruneRequest.More): a
// directory's names come in parts; an older agent would prune with the
// first part's names alone. A prune's answer may come in several results
// (PruneResult.More).
// 10: a manifest's file may be marked as named by the sender's resume
// journal (kindResumed); an older agent would refuse the kind.
// 11: a prune request may ask for counts alone (CountOnly) and carry a
// limit; its results carry the counts (the --delete guard, --max-delete).
// An older agent would delete where a count was asked for.
const Proto = 11

// Frame types.
const (
	Hello    byte = 'H' // both ways: JSON Handshake
	Manifest byte = 'M' // sender: the entries of one batch
	Need     byte = 'N' // agent: which files of a manifest it wants
	Data     byte = 'D' // sender: batch id and codec; a tar stream follows the frame (compressed: in chunks)
	Commit   byte = 'C' // sender: batch id and the files to discard
	Ack      byte = 'A' // agent: a batch is in place
	End      byte = 'E' // sender: no more batches
	Summary  byte = 'S' // agent: JSON totals, the last frame
	Fail     byte = 'X' // either: fatal error text, the connection ends (the agent's, in place of its Hello: the handshake refused, and why)
	Skipped  byte = 'K' // agent: batch id needs no data and is committed; its Ack follows
	Prune    byte = 'P' // sender: directories and the names they keep (--delete)
	Pruned   byte = 'R' // agent: what a Prune removed
)

// Limits on what a peer may declare.
const (
	MaxFrame   = 64 << 20 // payload bytes of one frame
	MaxEntries = 1 << 20  // entries in one manifest
	MaxPath    = 4096     // bytes in a path or link target
	MaxMessage = 64 << 10 // bytes in an error message
)

// ErrProtocol marks a malformed or unexpected frame from the peer.
var ErrProtocol = errors.New("protocol error")

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame %q of %d bytes exceeds the %d-byte limit", typ, len(payload), MaxFrame)
	}
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads one frame. A clean end of input before a frame starts is
// io.EOF; a frame cut short is io.ErrUnexpectedEOF.
func ReadFrame(r *bufio.Reader) (typ byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	typ = h[0]
	n := binary.BigEndian.Uint32(h[1:])
	if !validType(typ) {
		return 0, nil, protoErr("unknown frame type 0x%02x (is the peer bulkmove? it sent %q)", typ, printable(h[:]))
	}
	if n > MaxFrame {
		return 0, nil, protoErr("frame %q declares %d bytes, over the %d-byte limit", typ, n, MaxFrame)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return typ, payload, nil
}

func validType(t byte) bool {
	switch t {
	case Hello, Manifest, Need, Data, Commit, Ack, End, Summary, Fail, Prune, Pruned, Skipped:
		return true
	}
	return false
}

func printable(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			out = append(out, c)
		} else {
			out = append(out, '.')
		}
	}
	return string(out)
}

// enc appends primitive values.
type enc struct{ b []byte }

func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(s string)   { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }

// dec reads primitive values, recording the first error.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = protoErr("truncated or invalid %s", what)
	}
}

func (d *dec) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) str(what string, max int) string {
	n := d.uvarint(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(max) {
		d.err = protoErr("%s of %d bytes exceeds the %d-byte limit", what, n, max)
		return ""
	}
	if uint64(len(d.b)) < n {
		d.fail(what)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = protoErr("%d trailing bytes after %s", len(d.b), what)
	}
	return d.err
}
