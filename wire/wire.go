// Package wire is bulkmove's framing between a sender and a receiver agent:
// frames for the handshake, batch manifests, the receiver's answer of which
// files it needs, commits, acknowledgements and the final summary. File data
// itself travels between a Data frame and the next frame as a plain tar stream
// (see package send), so a captured batch can be read with `tar -tv`.
//
// A frame is one type byte, a big-endian uint32 payload length and the
// payload. Every length and count read from the wire is bounds-checked
// against the limits below before anything is allocated for it.
//
// Before the frames, a hub (the agent, a pull's send-hub) announces itself
// with a banner line, and each stream joining it on its Unix socket proves
// it holds the job's token as the hub proves it too: see hub.go.
//
// wire owns every constant the two ends must agree on: besides the frames
// and their limits, the PAX records the tar stream carries (tar.go), what
// a stream keeps in flight and the bounds of compressed data (stream.go),
// and the refusal of a handshake (refuse.go). It imports only the data
// model (package model), so that the sending side (package send) and the
// receiving side (package receive) can both import it without importing
// each other.
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
// 12: the agent hub's socket proves its tokens both ways (JOIN2, NEW2) and
// its banner (BULKMOVE-HUB2) names no executable; an older agent takes a
// token from whatever connects, and a sender would find its banner bad.
// 13: the receiver grants the safety options of a Hello (owners,
// setuid/setgid bits, extended attributes, ACLs) within its own policy,
// an agent's given on its command line (--allow-owner, --allow-setid,
// --allow-xattrs, --allow-acls), and its Hello names what it denied. An
// older agent would refuse those flags, or take the Hello as its policy.
// 14: a pull's send-hub takes the job's options whole, as one --config
// argument (the sender's Config, JSON in base64), not flag by flag; an
// older send-hub would refuse the argument.
// 15: the internal commands are started as CmdAgent, CmdSendHub and
// CmdJoin (flags, not words): an older bulkmove would take them for
// unknown flags of a move.
// 16: manifests may hold devices, FIFOs and sockets (-D), a device with
// its major and minor after its link, and an agent takes --allow-devices;
// an older agent would refuse the entries' kinds, and the flag.
// 17: a manifest may ask what a move would change, writing nothing
// (FlagItemize), and a dry run says so in its receive options (DryRun);
// an older agent would move the batch, and make a DEST not there.
// 18: the receive options may ask that what a pass replaces or deletes be
// moved aside (Backup, BackupDir, Suffix), acks name what was
// (BatchAck.Backups, PrunedEntry.Backup); an older agent would overwrite
// and delete.
// Also 18: they may ask to leave alone files newer at DEST
// (Update, -u) and to create nothing (Existing, --existing); an older
// agent would ignore them and overwrite or create.
// Also 18: the receive options may map owners (UserMap, GroupMap, ByName) and
// change modes (Chmod), and a manifest may end with the sender's names of
// its owners (BatchManifest.Names); an older agent would keep the owners
// and modes as sent, and refuse the names.
// Also 18: a remote-to-remote move starts CmdR2RSend on SRC's host; an
// older bulkmove there would refuse it as an unknown flag.
// Also 18: they may ask the receiver to keep owners, modes and
// devices in user.rsync.%stat (FakeSuper); an older agent would chown
// and mknod, or fail where it cannot.
// 19: the receive options may ask for the block delta (DeltaMin): the
// agent answers a manifest with Blocks frames before its Need, and a tar
// entry may carry only the blocks that changed (PAXDelta); an older agent
// would write such an entry as the whole file.
// 20: the receive options may ask for the block delta in place (InPlace):
// an older agent would build the new version in a copy beside the old,
// which DEST may have no room for, and give the file another inode.
// Also 20: a block delta's entry may name blocks that are zeros, holes in
// SRC's file, sent as no bytes (PAXDeltaZero); an older agent would keep
// its own blocks there.
// 21: a block list's blocks may be as small as 32 KiB (MinBlock); an
// older sender would refuse the list.
const Proto = 21

// The first words of the internal commands, which one end starts on the
// other's host (over SSH, or as a local child): written as flags, so that
// no operand a user gives can start one (bulkmove agent DIR moves ./agent
// into DIR), and no directory a login starts in changes what they mean.
const (
	CmdAgent   = "--agent"    // the receiver of a push: receive/agentd
	CmdSendHub = "--send-hub" // the sender of a pull: transport/accepted
	CmdJoin    = "--join"     // a stream's relay to a hub's socket
	CmdR2RSend = "--r2r-send" // the sender of a remote-to-remote move, on SRC's host
)

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
	Blocks   byte = 'B' // agent: the block hashes of DEST's copy of one entry, before the batch's Need (delta.go)
)

// Limits on what a peer may declare.
const (
	MaxFrame   = 64 << 20 // payload bytes of one frame, of the types that carry lists (see FrameLimit)
	MaxEntries = 1 << 20  // entries in one manifest
	MaxPath    = 4096     // bytes in a path or link target
	MaxMessage = 64 << 10 // bytes in an error message
)

// Limits of the frames that carry no list: a peer that declares more is
// refused at the frame's header, before anything is read or allocated.
const (
	maxSmallFrame = 1 << 10           // Data, Skipped, End: a batch id and a codec
	maxHelloFrame = 64 << 10          // Hello and Summary: a few JSON fields and a root path
	maxNeedFrame  = 32 + MaxEntries/8 // Need: a bit per entry of a manifest
	maxFailFrame  = MaxMessage        // Fail: an error's text (WriteFrame cuts a longer one)
)

// FrameLimit is the most payload bytes a frame of type typ may carry.
// Manifests, commits, acks and prune frames carry lists (up to MaxEntries
// entries, hashes or errors) and may take up to MaxFrame; a receiver may
// bound them further (FrameReader.Admit).
func FrameLimit(typ byte) int {
	switch typ {
	case Data, Skipped, End:
		return maxSmallFrame
	case Hello, Summary:
		return maxHelloFrame
	case Need:
		return maxNeedFrame
	case Fail:
		return maxFailFrame
	case Blocks:
		return maxBlocksFrame
	}
	return MaxFrame
}

// ErrProtocol marks a malformed or unexpected frame from the peer.
var ErrProtocol = errors.New("protocol error")

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// WriteFrame writes one frame. A Fail frame's text is cut to the frame's
// limit, so that the peer reads the reason rather than refusing the frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if typ == Fail && len(payload) > maxFailFrame {
		payload = payload[:maxFailFrame]
	}
	if max := FrameLimit(typ); len(payload) > max {
		return fmt.Errorf("frame %q of %d bytes exceeds the %d-byte limit", typ, len(payload), max)
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

// ReadFrame reads one frame into a payload of its own. A clean end of
// input before a frame starts is io.EOF; a frame cut short is
// io.ErrUnexpectedEOF.
func ReadFrame(r *bufio.Reader) (typ byte, payload []byte, err error) {
	fr := FrameReader{R: r}
	typ, payload, err = fr.next(false)
	return typ, payload, err
}

// FrameReader reads frames from R. Each frame's payload is read as it
// arrives: memory grows with the bytes the peer has sent, never ahead of
// them to what its header declares (a peer that declares 64 MiB and
// sends ten bytes costs ten bytes).
type FrameReader struct {
	R *bufio.Reader
	// Admit, if set, is asked about each frame's declared length, after
	// the type's own limit (FrameLimit) and before the payload is read: an
	// error refuses the frame, and Next returns it. The receiver bounds
	// manifests by what its job may still hold this way.
	Admit func(typ byte, n int) error

	buf []byte // payloads up to reuseMax, reused from frame to frame
}

// reuseMax is the largest payload read into the reader's own buffer, and
// the first step of a larger payload's growth: most frames (a need list,
// an ack, a manifest of a batch of small files) fit.
const reuseMax = 64 << 10

// Next reads one frame. Its payload is valid until the next call to Next
// (a payload of up to 64 KiB is read into a buffer reused from frame to
// frame): decode it before reading on. Errors are as ReadFrame's.
func (f *FrameReader) Next() (typ byte, payload []byte, err error) {
	return f.next(true)
}

func (f *FrameReader) next(reuse bool) (typ byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(f.R, h[:]); err != nil {
		return 0, nil, err
	}
	typ = h[0]
	n := binary.BigEndian.Uint32(h[1:])
	if !validType(typ) {
		return 0, nil, protoErr("unknown frame type 0x%02x (is the peer bulkmove? it sent %q)", typ, printable(h[:]))
	}
	if max := FrameLimit(typ); n > uint32(max) {
		return 0, nil, protoErr("frame %q declares %d bytes, over the %d-byte limit of its type", typ, n, max)
	}
	if f.Admit != nil {
		if err := f.Admit(typ, int(n)); err != nil {
			return 0, nil, err
		}
	}
	var buf []byte
	if reuse && n <= reuseMax {
		if f.buf == nil {
			f.buf = make([]byte, reuseMax)
		}
		buf = f.buf
	}
	payload, err = readPayload(f.R, int(n), buf)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return typ, payload, nil
}

// readPayload reads n bytes: into buf if it has room, else into a buffer
// that grows, doubling, as the bytes arrive, up to n. It never holds more
// than twice what was read (and at least reuseMax).
func readPayload(r *bufio.Reader, n int, buf []byte) ([]byte, error) {
	if n <= cap(buf) {
		buf = buf[:n]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	if n <= reuseMax || n <= r.Buffered() {
		// All of it is at hand, or the frame is small: one allocation.
		buf = make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	b := make([]byte, 0, max(reuseMax, r.Buffered()))
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, 2*cap(b)))
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func validType(t byte) bool {
	switch t {
	case Hello, Manifest, Need, Data, Commit, Ack, End, Summary, Fail, Prune, Pruned, Skipped, Blocks:
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
