package xattrs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// --fake-super keeps what an unprivileged receiver cannot set (owner,
// setuid/setgid bits, devices and special files) in one attribute of the
// file, in rsync's own format, so that rsync --fake-super and bulkmove
// --fake-super each read back what the other wrote: "MODE MAJOR,MINOR
// UID:GID", MODE in octal with the file type bits (S_IFMT), as rsync's
// set_stat_xattr writes it ("100644 0,0 0:0", "20640 4,64 0:5").

// StatName is the attribute (rsync's XSTAT_ATTR on Linux).
const StatName = "user.rsync.%stat"

// RsyncPrivate reports whether name is one of rsync's own attributes
// under --fake-super: the stat above and the ACLs rsync keeps there
// (user.rsync.%aacl, user.rsync.%dacl). A fake-super side neither copies
// them as attributes nor removes them.
func RsyncPrivate(name string) bool {
	switch name {
	case StatName, "user.rsync.%aacl", "user.rsync.%dacl":
		return true
	}
	return false
}

// Stat is what the attribute records.
type Stat struct {
	Mode         uint32 // S_IFMT type bits and the 07777 mode bits
	Major, Minor uint32 // a device's number; 0,0 otherwise
	UID, GID     uint32
}

// ErrCorrupt is a value that is not in the format.
var ErrCorrupt = errors.New("not rsync's MODE MAJOR,MINOR UID:GID")

// Format is s as the attribute's value.
func (s Stat) Format() string {
	return fmt.Sprintf("%o %d,%d %d:%d", s.Mode, s.Major, s.Minor, s.UID, s.GID)
}

// ParseStat reads an attribute's value, as rsync does (sscanf
// "%o %d,%d %d:%d": a trailing NUL or newline is left).
func ParseStat(v string) (Stat, error) {
	v = strings.TrimRight(v, "\x00\n")
	mode, rest, ok1 := strings.Cut(v, " ")
	dev, ids, ok2 := strings.Cut(rest, " ")
	major, minor, ok3 := strings.Cut(dev, ",")
	uid, gid, ok4 := strings.Cut(ids, ":")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return Stat{}, fmt.Errorf("%q: %w", v, ErrCorrupt)
	}
	var s Stat
	for _, f := range []struct {
		p    *uint32
		s    string
		base int
	}{{&s.Mode, mode, 8}, {&s.Major, major, 10}, {&s.Minor, minor, 10}, {&s.UID, uid, 10}, {&s.GID, gid, 10}} {
		n, err := strconv.ParseUint(strings.TrimSpace(f.s), f.base, 32)
		if err != nil {
			return Stat{}, fmt.Errorf("%q: %w", v, ErrCorrupt)
		}
		*f.p = uint32(n)
	}
	return s, nil
}

// ReadStat reads t's attribute: ok is false where it has none (or its
// filesystem has no attributes).
func (t Target) ReadStat() (s Stat, ok bool, err error) {
	v, err := t.Get(StatName)
	if err == ErrNoAttr || Unsupported(err) {
		return Stat{}, false, nil
	}
	if err != nil {
		return Stat{}, false, err
	}
	s, err = ParseStat(string(v))
	return s, err == nil, err
}
