package itemize

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/model"
)

// A Format is rsync's --out-format (and --log-file-format): text with
// %-escapes, each standing for a figure of the entry a line is about.
//
//	%n  the name (a directory with a trailing /)   %L  " -> target" of a symlink, " => first" of a hard link
//	%i  the 11-character code, as -i writes it     %o  the operation: send, recv or del.
//	%l  the length in bytes                        %b  the bytes of its data sent (0: only attributes set)
//	%f  the full path, SRC (or DEST) included      %M  the mtime, 2006/01/02-15:04:05
//	%B  the permission bits, rwxr-xr-x             %U  %G  the numeric owner and group
//	%t  the date and time, 2006/01/02 15:04:05     %p  this process's id
//	%%  a %
//
// As in rsync, a width may come between the % and the letter (%-10n pads
// to 10 on the right, %10l on the left), and apostrophes make a number
// easier to read: %'l writes 1,234,567, %”l 1.23M, %”'l 1.18M in
// units of 1024.
type Format struct {
	src   string
	parts []part
	hasI  bool
}

type part struct {
	lit   string // text as it is, when esc is 0
	esc   byte
	width int  // at least this wide
	left  bool // padded on the right (%-10n)
	human int  // apostrophes: see units.BigNum
}

// Default is -i's format, as rsync defines -i: --out-format='%i %n%L'.
const Default = "%i %n%L"

// unsupported are rsync's escapes for what bulkmove does not have: a
// daemon's module and client, rsync's checksums.
var unsupported = map[byte]string{
	'a': "the remote IP (an rsync daemon's)", 'h': "the remote host (an rsync daemon's)",
	'm': "the module (an rsync daemon's)", 'P': "the module path (an rsync daemon's)",
	'u': "the authenticated user (an rsync daemon's)", 'c': "rsync's checksum", 'C': "rsync's whole-file checksum",
}

// ParseFormat reads a --out-format. An escape it does not know is an
// error naming it.
func ParseFormat(s string) (*Format, error) {
	f := &Format{src: s}
	lit := strings.Builder{}
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			continue
		}
		start := i
		var p part
		i++
		if i < len(s) && s[i] == '-' {
			p.left = true
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i > j {
			p.width, _ = strconv.Atoi(s[j:i])
		}
		for i < len(s) && s[i] == '\'' {
			p.human++
			i++
		}
		if i == len(s) {
			return nil, fmt.Errorf("%q ends in the middle of an escape (%s): %%%% writes a %%", s, s[start:])
		}
		c := s[i]
		switch c {
		case 'n', 'L', 'i', 'o', 'l', 'b', 'f', 'M', 'B', 'U', 'G', 't', 'p', '%':
		default:
			if why, ok := unsupported[c]; ok {
				return nil, fmt.Errorf("%q: escape %s is %s, which bulkmove does not have", s, s[start:i+1], why)
			}
			return nil, fmt.Errorf("%q: unknown escape %s (known: %%n %%L %%i %%o %%l %%b %%f %%M %%B %%U %%G %%t %%p %%%%)", s, s[start:i+1])
		}
		if lit.Len() > 0 {
			f.parts = append(f.parts, part{lit: lit.String()})
			lit.Reset()
		}
		p.esc = c
		f.hasI = f.hasI || c == 'i'
		f.parts = append(f.parts, p)
	}
	if lit.Len() > 0 {
		f.parts = append(f.parts, part{lit: lit.String()})
	}
	return f, nil
}

// String is the format as given.
func (f *Format) String() string { return f.src }

// Shows says whether an entry gets a line, as rsync decides: with %i in
// the format, every entry with something changed; without, those whose
// data was sent, the ones made in place (a symlink, a hard link),
// directories with anything changed, and deletions.
func (f *Format) Shows(r *Record) bool {
	switch {
	case r.Code == "":
		return false
	case f.hasI, r.Code == Deleted, r.Code[0] == '<' || r.Code[0] == '>':
		return true
	}
	return r.Entry.Kind == model.KindDir || r.Code[0] == 'c' || r.Code[0] == 'h'
}

// A Record is what a line says of one entry.
type Record struct {
	Entry *model.Entry
	Code  string    // %i: Code's, or Deleted
	Op    string    // %o: send, recv or del.
	Sent  int64     // %b
	Full  string    // %f: the full path; "": the entry's Path
	Time  time.Time // %t
}

// Line is r as f writes it. Names are escaped as termsafe.Escape does.
func (f *Format) Line(r *Record) string {
	var b strings.Builder
	e := r.Entry
	for _, p := range f.parts {
		if p.esc == 0 {
			b.WriteString(p.lit)
			continue
		}
		var v string
		switch p.esc {
		case 'n':
			v = termsafe.Escape(name(e))
		case 'L':
			switch e.Kind {
			case model.KindSymlink:
				v = " -> " + termsafe.Escape(e.Link)
			case model.KindHardlink:
				v = " => " + termsafe.Escape(e.Link)
			}
		case 'i':
			v = r.Code
			if v == Deleted {
				v = Deleted + "  " // 11 wide, as rsync's
			}
		case 'o':
			v = r.Op
		case 'l':
			v = units.BigNum(length(e), p.human)
		case 'b':
			v = units.BigNum(r.Sent, p.human)
		case 'f':
			v = r.Full
			if v == "" {
				v = e.Path
			}
			v = termsafe.Escape(v)
		case 'M':
			v = time.Unix(0, e.MTime).Format("2006/01/02-15:04:05")
		case 'B':
			v = Perms(e)
		case 'U':
			v = strconv.FormatUint(uint64(e.UID), 10)
		case 'G':
			v = strconv.FormatUint(uint64(e.GID), 10)
		case 't':
			v = r.Time.Format("2006/01/02 15:04:05")
		case 'p':
			v = strconv.Itoa(os.Getpid())
		case '%':
			v = "%"
		}
		if pad := p.width - len([]rune(v)); pad > 0 {
			if p.left {
				v += strings.Repeat(" ", pad)
			} else {
				v = strings.Repeat(" ", pad) + v
			}
		}
		b.WriteString(v)
	}
	return b.String()
}

// name is %n: the path, a directory's with a trailing slash (the top one
// as ./).
func name(e *model.Entry) string {
	if e.Kind == model.KindDir {
		if e.Path == "." {
			return "./"
		}
		return e.Path + "/"
	}
	return e.Path
}

// length is %l: a file's size, a symlink's target's length. A
// directory's is 0: the walk does not keep what stat says of it.
func length(e *model.Entry) int64 {
	switch e.Kind {
	case model.KindFile, model.KindHardlink:
		return e.Size
	case model.KindSymlink:
		return int64(len(e.Link))
	}
	return 0
}

// Perms is %B: the permission bits as ls writes them, without the type
// (rwsr-x--T); a symlink's are rwxrwxrwx.
func Perms(e *model.Entry) string {
	m := e.Mode
	if e.Kind == model.KindSymlink {
		m = 0o777
	}
	b := []byte("rwxrwxrwx")
	for i := range b {
		if m&(1<<(8-i)) == 0 {
			b[i] = '-'
		}
	}
	for _, s := range []struct {
		bit     fs.FileMode
		at      int
		on, off byte
	}{{fs.ModeSetuid, 2, 's', 'S'}, {fs.ModeSetgid, 5, 's', 'S'}, {fs.ModeSticky, 8, 't', 'T'}} {
		if m&s.bit != 0 {
			if b[s.at] == 'x' {
				b[s.at] = s.on
			} else {
				b[s.at] = s.off
			}
		}
	}
	return string(b)
}
