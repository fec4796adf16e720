package unixmode

import (
	"fmt"
	"strings"
)

// Chmod is a list of rsync --chmod changes, applied in order to the mode
// a sender sends: chmod(1)'s symbolic modes (`[ugoa]*[-+=][rwxXst]*`,
// the copies `[ugoa]*[-+=][ugo]`) and octal modes, each for directories
// alone with a D prefix, for everything else with an F prefix. The rules,
// rsync's own (chmod.c), are documented with --chmod in docs/rsync.md.
type Chmod []ChmodClause

// ChmodClause is one comma-separated item of a --chmod: the bits it keeps
// (And) and sets (Or), or, for a permission copy, the class it copies.
type ChmodClause struct {
	And, Or uint32
	Only    byte // 'D': directories only, 'F': all but directories, 0: both
	// XKeep (the X letter): the x bits of Or are set only on directories
	// and on files with some x bit in the mode as sent.
	XKeep bool
	// Copy, if not 0, is the class whose permissions the clause copies
	// ('u', 'g' or 'o'): into the classes Where (0111 bits: 0100 user,
	// 0010 group, 0001 other) with Op, masked by Mask (the umask's
	// complement where no class was named).
	Copy  byte
	Op    byte
	Where uint32
	Mask  uint32
}

const permBits = 0o7777

// ParseChmod parses one --chmod argument, rsync's syntax; umask is the one
// that clauses naming no class (+w, =rX) are masked by: the sender's, as
// rsync's where both ends are one process.
func ParseChmod(s string, umask uint32) (Chmod, error) {
	var out Chmod
	for _, item := range strings.Split(s, ",") {
		c, err := parseClause(item, umask&0o777)
		if err != nil {
			return nil, fmt.Errorf("--chmod %q: %q: %v", s, item, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseClause parses one item, as rsync's parse_chmod state machine does.
func parseClause(item string, umask uint32) (ChmodClause, error) {
	var c ChmodClause
	var where, what, topbits, topoct uint32
	var op byte
	octal := false
	i := 0
	// The first half: D or F, the classes, up to the operator (or an
	// octal number's first digit).
	for ; i < len(item) && op == 0; i++ {
		switch ch := item[i]; ch {
		case 'D', 'F':
			if c.Only != 0 && c.Only != ch {
				return c, fmt.Errorf("both D and F")
			}
			c.Only = ch
		case 'u':
			where |= 0o100
			topbits |= 0o4000
		case 'g':
			where |= 0o010
			topbits |= 0o2000
		case 'o':
			where |= 0o001
		case 'a':
			where |= 0o111
		case '+', '-', '=':
			op = ch
		default:
			if ch < '0' || ch > '7' || where != 0 {
				return c, fmt.Errorf("unexpected %q", ch)
			}
			op, octal, what = '#', true, uint32(ch-'0')
		}
	}
	if op == 0 {
		return c, fmt.Errorf("no operator (+, - or =) and no octal mode")
	}
	// The second half: the permissions (or the octal number's digits).
	for ; i < len(item); i++ {
		ch := item[i]
		if octal {
			if ch < '0' || ch > '7' {
				return c, fmt.Errorf("%q in an octal mode", ch)
			}
			if what = what*8 + uint32(ch-'0'); what > permBits {
				return c, fmt.Errorf("octal mode over 7777")
			}
			continue
		}
		if c.Copy != 0 {
			return c, fmt.Errorf("a permission copy takes one class alone")
		}
		switch ch {
		case 'r':
			what |= 4
		case 'w':
			what |= 2
		case 'X':
			c.XKeep = true
			what |= 1
		case 'x':
			what |= 1
		case 's':
			// As rsync: s with no u or g named sets setuid.
			if topbits != 0 {
				topoct |= topbits
			} else {
				topoct = 0o4000
			}
		case 't':
			topoct |= 0o1000
		case 'u', 'g', 'o':
			if what != 0 || topoct != 0 || c.XKeep {
				return c, fmt.Errorf("a permission copy takes no r, w, x, X, s or t")
			}
			c.Copy = ch
		default:
			return c, fmt.Errorf("unexpected %q", ch)
		}
	}
	if octal {
		c.And, c.Or = 0, what
		return c, nil
	}
	mask := uint32(permBits)
	if where == 0 {
		where, mask = 0o111, ^umask&0o777
	}
	if c.Copy != 0 {
		c.Op, c.Where, c.Mask = op, where, mask
		return c, nil
	}
	bits := where * what & mask
	switch op {
	case '+':
		c.And, c.Or = permBits, bits|topoct
	case '-':
		c.And, c.Or = permBits&^(bits|topoct), 0
	case '=':
		c.And, c.Or = permBits&^(where*7), bits|topoct
		if topoct != 0 {
			c.And &^= topbits
		}
	}
	return c, nil
}

// Apply returns mode (its 07777 bits; a directory's if dir) changed by
// each clause in turn, as rsync's tweak_mode.
func (m Chmod) Apply(mode uint32, dir bool) uint32 {
	isX := mode&0o111 != 0
	mode &= permBits
	for _, c := range m {
		if c.Only == 'D' && !dir || c.Only == 'F' && dir {
			continue
		}
		if c.Copy != 0 {
			mode = c.copy(mode)
			continue
		}
		mode &= c.And
		if c.XKeep && !isX && !dir {
			mode |= c.Or &^ 0o111
		} else {
			mode |= c.Or
		}
	}
	return mode
}

// copy applies a permission copy (g=u, o+g, a-o) to mode.
func (c *ChmodClause) copy(mode uint32) uint32 {
	var v uint32
	switch c.Copy {
	case 'u':
		v = mode >> 6 & 7
	case 'g':
		v = mode >> 3 & 7
	case 'o':
		v = mode & 7
	}
	bits := c.Where * v & c.Mask
	switch c.Op {
	case '+':
		return mode | bits
	case '-':
		return mode &^ bits
	}
	// = clears each class it sets and, as GNU chmod, its special bit.
	clear := c.Where * 7
	if c.Where&0o100 != 0 {
		clear |= 0o4000
	}
	if c.Where&0o010 != 0 {
		clear |= 0o2000
	}
	if c.Where&0o001 != 0 {
		clear |= 0o1000
	}
	return mode&^clear | bits
}
