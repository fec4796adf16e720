package model

import (
	"encoding/binary"
	"errors"
	"io/fs"
)

// EntryCodec encodes a Entry, every field of it (Dev, Ino and CTime too).
type EntryCodec struct{}

// Append appends e's encoding to b.
func (EntryCodec) Append(b []byte, e *Entry) []byte { return AppendEntry(b, e) }

// Decode reads one entry.
func (EntryCodec) Decode(b []byte) (Entry, error) {
	e, rest, err := ReadEntry(b)
	if err == nil && len(rest) > 0 {
		err = errors.New("trailing bytes after an entry")
	}
	return e, err
}

// AppendEntry appends e's encoding to b: for codecs of records that
// hold an entry and more.
func AppendEntry(b []byte, e *Entry) []byte {
	b = binary.AppendUvarint(b, uint64(len(e.Path)))
	b = append(b, e.Path...)
	b = append(b, byte(e.Kind))
	b = binary.AppendUvarint(b, uint64(e.Mode))
	b = binary.AppendVarint(b, e.Size)
	b = binary.AppendVarint(b, e.MTime)
	b = binary.AppendUvarint(b, uint64(e.UID))
	b = binary.AppendUvarint(b, uint64(e.GID))
	b = binary.AppendUvarint(b, uint64(len(e.Link)))
	b = append(b, e.Link...)
	b = binary.AppendUvarint(b, uint64(e.Nlink))
	b = binary.AppendUvarint(b, e.Dev)
	b = binary.AppendUvarint(b, e.Ino)
	b = binary.AppendUvarint(b, e.Rdev)
	b = binary.AppendVarint(b, e.CTime)
	return b
}

var errShort = errors.New("short entry")

// ReadEntry reads an entry AppendEntry wrote from the start of b and
// returns what follows it.
func ReadEntry(b []byte) (Entry, []byte, error) {
	var e Entry
	r := reader{b: b}
	e.Path = r.str()
	if len(r.b) < 1 {
		return e, nil, errShort
	}
	e.Kind = Kind(r.b[0])
	r.b = r.b[1:]
	e.Mode = fs.FileMode(r.uvarint())
	e.Size = r.varint()
	e.MTime = r.varint()
	e.UID = uint32(r.uvarint())
	e.GID = uint32(r.uvarint())
	e.Link = r.str()
	e.Nlink = uint32(r.uvarint())
	e.Dev = r.uvarint()
	e.Ino = r.uvarint()
	e.Rdev = r.uvarint()
	e.CTime = r.varint()
	if r.bad {
		return e, nil, errShort
	}
	return e, r.b, nil
}

type reader struct {
	b   []byte
	bad bool
}

// advance moves past a number of n bytes (n <= 0: none could be read).
func (r *reader) advance(n int) {
	if n <= 0 {
		r.bad = true
		r.b = nil
		return
	}
	r.b = r.b[n:]
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	r.advance(n)
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	r.advance(n)
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.bad || uint64(len(r.b)) < n {
		r.bad = true
		r.b = nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
