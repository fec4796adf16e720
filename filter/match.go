package filter

import (
	"errors"
	"fmt"
	"strings"
)

// matchKind selects how a compiled pattern is matched. The literal and
// base-name kinds are fast paths for what rsync's general matcher would
// decide the same way.
type matchKind uint8

const (
	litBase    matchKind = iota // no wildcard, no '/': the base name equals lit
	litPath                     // no wildcard, anchored: the path equals lit
	litTail                     // no wildcard, a '/': the path ends in lit at a '/'
	baseAny                     // "*": any base name
	baseSuffix                  // "*lit": the base name ends in lit
	basePrefix                  // "lit*": the base name starts with lit
	baseInfix                   // "*lit*": the base name contains lit
	baseWild                    // other wildcards, no '/' and no "**": match the base name
	pathWild                    // wildcards against the path, as where says
)

// matcher is one compiled pattern, following rsync's rule_matches().
type matcher struct {
	kind    matchKind
	dirOnly bool   // the pattern ended in '/'
	lit     string // for the lit* and base* kinds
	pat     string // for baseWild and pathWild: the pattern, without an anchoring '/'
	// For pathWild, rsync's wildmatch_array "where": 0 matches the whole
	// path, N > 0 its last N elements, -1 the path or any tail of it that
	// starts after a '/'.
	where  int
	prefix bool // the pattern starts with "**": match as if the path started with '/'
	wild3  bool // the pattern ends in "***": a directory also matches as if it ended in '/'
}

// compile compiles one pattern (the rule's type and modifiers removed).
func compile(pat string, fast bool) (matcher, error) {
	var m matcher
	if strings.IndexByte(pat, 0) >= 0 {
		return m, errors.New("pattern contains a NUL byte")
	}
	// As rsync: only one trailing '/' is removed, and "/" alone is not
	// a directory-only pattern.
	if len(pat) > 1 && pat[len(pat)-1] == '/' {
		m.dirOnly = true
		pat = pat[:len(pat)-1]
	}
	slashes := strings.Count(pat, "/")
	anchored := pat[0] == '/'
	body := pat
	if anchored {
		body = pat[1:]
	}
	if body == "" {
		return m, errors.New("empty pattern")
	}
	if !strings.ContainsAny(pat, "*?[") {
		// A literal: backslashes are not escapes (rsync's strcmp paths).
		m.lit = body
		switch {
		case anchored:
			m.kind = litPath
		case slashes == 0:
			m.kind = litBase
		default:
			m.kind = litTail
		}
		return m, nil
	}
	if err := checkWild(body); err != nil {
		return m, err
	}
	m.pat = body
	star2 := strings.Index(pat, "**")
	m.prefix = star2 == 0
	m.wild3 = star2 >= 0 && strings.HasSuffix(pat, "***")
	switch {
	case slashes == 0 && star2 < 0:
		m.kind = baseWild
		if fast {
			m.baseFastPath()
		}
	case anchored:
		m.kind, m.where = pathWild, 0
	case star2 < 0:
		m.kind, m.where = pathWild, slashes+1
	case !m.prefix:
		m.kind, m.where = pathWild, -1
	default:
		m.kind, m.where = pathWild, 0
	}
	return m, nil
}

// baseFastPath turns a base-name pattern of the form "*", "*lit", "lit*" or
// "*lit*" (lit free of wildcards and backslashes) into a string test.
func (m *matcher) baseFastPath() {
	p := m.pat
	lead := strings.HasPrefix(p, "*")
	trail := len(p) > 1 && strings.HasSuffix(p, "*")
	lit := p
	if lead {
		lit = lit[1:]
	}
	if trail {
		lit = lit[:len(lit)-1]
	}
	if strings.ContainsAny(lit, `*?[\`) {
		return
	}
	switch {
	case lit == "" && lead:
		m.kind = baseAny
	case lead && trail:
		m.kind = baseInfix
	case lead:
		m.kind = baseSuffix
	case trail:
		m.kind = basePrefix
	default:
		return
	}
	m.lit = lit
}

// match reports whether the pattern matches path (slash-separated, relative
// to the transfer root), whose last element is base.
func (m *matcher) match(path, base string, isDir bool) bool {
	if m.dirOnly && !isDir {
		return false
	}
	switch m.kind {
	case litBase:
		return base == m.lit
	case litPath:
		return path == m.lit
	case litTail:
		n := len(path) - len(m.lit)
		return n >= 0 && path[n:] == m.lit && (n == 0 || path[n-1] == '/')
	case baseAny:
		return true
	case baseSuffix:
		return strings.HasSuffix(base, m.lit)
	case basePrefix:
		return strings.HasPrefix(base, m.lit)
	case baseInfix:
		return strings.Contains(base, m.lit)
	case baseWild:
		return dowild(m.pat, subject{s: base, n: len(base)}, 0) == matched
	}
	t := subject{s: path, n: len(path)}
	if m.prefix {
		t.pre = 1
		t.n++
	}
	if m.wild3 && isDir {
		t.n++
	}
	return wildmatchArray(m.pat, t, m.where)
}

// checkWild reports what makes a wildcard pattern unable to ever match:
// rsync accepts such a pattern silently, and its rule then matches nothing.
func checkWild(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 == len(p) {
				return errors.New("trailing backslash")
			}
			i++
		case '[':
			end, _, err := class(p, i, 0)
			if err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

// subject is the text a pattern is matched against: s, after a '/' if pre
// is 1, and before a '/' if n is one more than len(s)+pre. It stands for
// rsync's array of strings, without building the string.
type subject struct {
	s   string
	pre int
	n   int
}

func (t subject) at(i int) byte {
	i -= t.pre
	if uint(i) < uint(len(t.s)) {
		return t.s[i]
	}
	return '/'
}

// Results of dowild, as in rsync's lib/wildmatch.c.
const (
	noMatch         = 0
	matched         = 1
	abortAll        = -1
	abortToStarStar = -2
)

// dowild matches pattern p against t from ti on: rsync's dowild(). '?'
// matches one character but '/', '*' any run without a '/', a run of two
// or more '*' any run at all, '[...]' one character (never '/') of a
// class, and '\' makes the next character literal.
func dowild(p string, t subject, ti int) int {
	for pi := 0; pi < len(p); pi, ti = pi+1, ti+1 {
		pc := p[pi]
		var tc byte
		if ti < t.n {
			tc = t.at(ti)
		} else if pc != '*' {
			return abortAll
		}
		switch pc {
		case '\\':
			pi++
			if pi == len(p) || tc != p[pi] {
				return noMatch
			}
		default:
			if tc != pc {
				return noMatch
			}
		case '?':
			if tc == '/' {
				return noMatch
			}
		case '*':
			pi++
			special := pi < len(p) && p[pi] == '*'
			for pi < len(p) && p[pi] == '*' {
				pi++
			}
			if pi == len(p) {
				// A trailing "**" matches everything, a trailing "*"
				// what has no '/'.
				if !special {
					for ; ti < t.n; ti++ {
						if t.at(ti) == '/' {
							return noMatch
						}
					}
				}
				return matched
			}
			for ; ti < t.n; ti++ {
				if r := dowild(p[pi:], t, ti); r != noMatch {
					if !special || r != abortToStarStar {
						return r
					}
				} else if !special && t.at(ti) == '/' {
					return abortToStarStar
				}
			}
			return abortAll
		case '[':
			end, hit, err := class(p, pi, tc)
			if err != nil {
				return abortAll
			}
			if !hit || tc == '/' {
				return noMatch
			}
			pi = end
		}
	}
	if ti < t.n {
		return noMatch
	}
	return matched
}

// wildmatchArray is rsync's wildmatch_array(): where 0 matches the whole
// subject, N > 0 its last N slash-separated elements, and -1 the whole or
// any part of it that starts after a '/'.
func wildmatchArray(p string, t subject, where int) bool {
	ti := 0
	if where > 0 {
		// Never with a '/' added before or after (those need "**").
		ti = trailingElements(t.s, where)
		if ti < 0 {
			return false
		}
	}
	r := dowild(p, t, ti)
	if r != matched && where < 0 && r != abortAll {
		for {
			if ti >= t.n {
				return false
			}
			c := t.at(ti)
			ti++
			if c == '/' {
				if r = dowild(p, t, ti); r != noMatch && r != abortToStarStar {
					break
				}
			}
		}
	}
	return r == matched
}

// trailingElements returns where the last n slash-separated elements of s
// start, or -1 if s has fewer.
func trailingElements(s string, n int) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	if n == 1 {
		return 0
	}
	return -1
}

var errUnterminated = errors.New("unterminated character class")

// class matches c against the character class that starts at p[i] ('['):
// rsync's parsing, with "!" or "^" negating, ranges, backslash escapes,
// "[:name:]" classes, and a ']' first in the class a member. It returns the
// index of the closing ']' and whether c is in the class (a negated class
// has already been inverted).
func class(p string, i int, c byte) (end int, hit bool, err error) {
	at := func(i int) byte {
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	i++
	pc := at(i)
	if pc == '^' {
		pc = '!'
	}
	negated := pc == '!'
	if negated {
		i++
		pc = at(i)
	}
	var prev byte
	in := false
	for {
		switch {
		case pc == 0:
			return 0, false, errUnterminated
		case pc == '\\':
			i++
			if pc = at(i); pc == 0 {
				return 0, false, errUnterminated
			}
			in = in || c == pc
		case pc == '-' && prev != 0 && at(i+1) != 0 && at(i+1) != ']':
			i++
			pc = p[i]
			if pc == '\\' {
				i++
				if pc = at(i); pc == 0 {
					return 0, false, errUnterminated
				}
			}
			in = in || (c >= prev && c <= pc)
			pc = 0
		case pc == '[' && at(i+1) == ':':
			s := i + 2
			j := strings.IndexByte(p[s:], ']')
			if j < 0 {
				return 0, false, errUnterminated
			}
			j += s
			if j-s-1 < 0 || p[j-1] != ':' {
				// No ":]": the '[' is a plain member.
				in = in || c == '['
				break
			}
			name := p[s : j-1]
			ok, known := ctype(name, c)
			if !known {
				return 0, false, fmt.Errorf("unknown character class \"[:%s:]\"", name)
			}
			in = in || ok
			i = j
			pc = 0
		default:
			in = in || c == pc
		}
		prev = pc
		i++
		if pc = at(i); pc == ']' {
			return i, in != negated, nil
		}
	}
}

// ctype reports whether c is in the POSIX class name (in the C locale), and
// whether name is a class at all.
func ctype(name string, c byte) (in, known bool) {
	lower := c >= 'a' && c <= 'z'
	upper := c >= 'A' && c <= 'Z'
	digit := c >= '0' && c <= '9'
	graph := c > ' ' && c < 0x7f
	switch name {
	case "alnum":
		return lower || upper || digit, true
	case "alpha":
		return lower || upper, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < ' ' || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return graph, true
	case "lower":
		return lower, true
	case "print":
		return graph || c == ' ', true
	case "punct":
		return graph && !lower && !upper && !digit, true
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r'), true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}

// Wildmatch reports whether text matches the rsync wildcard pattern p
// whole, as rsync's wildmatch(): for names that hold no '/' (a user's, a
// group's), where '*' and '**' are alike.
func Wildmatch(p, text string) bool {
	return dowild(p, subject{s: text, n: len(text)}, 0) == matched
}
