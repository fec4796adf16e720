// Package filter implements rsync's include/exclude filter rules. A
// transfer uses them to choose which names of a tree it sends; a receiver
// deleting what the source no longer has would use them to choose which
// names it must leave alone.
//
// Rules are added in order, as rsync's --filter, --exclude, --include,
// --exclude-from and --include-from add them, and for each name the first
// rule whose pattern matches decides: an exclude rule leaves the name out,
// an include rule keeps it. A name no rule matches is included. A walk must
// not descend into an excluded directory, so nothing under it is sent
// either, whatever the rules say about it; to send a deep file, make sure
// none of the directories above it is excluded (the usual idiom is
// --include '*/' before a final --exclude '*').
//
// # Rules
//
// Add takes a rule as rsync's --filter does: a type, optional modifiers,
// then a single space or '_' and the pattern ("- *.o", "+_keep/", "-! */").
// The types are "-" or "exclude", "+" or "include", "H" or "hide" (an
// exclude for the sending side only), "S" or "show", "P" or "protect" (an
// exclude for the receiving side only: it protects from deletion and does
// not affect what is sent), "R" or "risk", and "!" or "clear", which empties
// the list. The modifiers are "!" (the rule applies to the names its
// pattern does not match), "s" (the sending side only) and "r" (the
// receiving side only).
//
// AddExclude and AddInclude take a pattern as --exclude and --include do,
// and AddFrom reads the files of --exclude-from and --include-from: a
// pattern, or "- PATTERN" or "+ PATTERN" to choose the type, or "!" to
// clear the list.
//
// # Patterns
//
// Patterns are matched as rsync's man page says under "PATTERN MATCHING
// RULES":
//
//   - a pattern starting with '/' is anchored at the root of the transfer
//     ("/build" is build at the top only); otherwise it matches at the end
//     of the path;
//   - a pattern containing a '/' (other than a trailing one) or "**" is
//     matched against the whole path, and unless anchored it may start at
//     any directory boundary ("foo/bar" matches "foo/bar" and "a/foo/bar",
//     "*/cache" matches "x/cache" and "a/x/cache"); a pattern without one
//     is matched against the last element only ("*.o");
//   - a pattern ending in '/' matches directories only ("cache/");
//   - '*' matches any run of characters but '/', "**" any run at all, '?'
//     one character but '/', "[...]" one character of a class ("[a-z]",
//     "[!0-9]", "[[:digit:]]"), and '\' makes the next character literal
//     (only in a pattern with a wildcard: "foo\bar" is matched as written);
//   - "dir/***" matches dir itself and everything under it.
//
// # Differences from rsync
//
// Merge rules ("." and ":"), and the modifiers "/", "C", "p" and "x", are
// not supported: Add returns an error for them. rsync accepts a wildcard
// pattern that can never match (an unterminated "[", an unknown
// "[:name:]", a trailing '\'), and a pattern that is only '/'; Add rejects
// them.
package filter

import (
	"errors"
	"fmt"
	"strings"
)

// Kind says how a rule given as text is read: as the argument of rsync's
// --exclude, --include or --filter.
type Kind int

const (
	// Exclude is a pattern to exclude; "+ PAT" includes PAT, "- PAT"
	// excludes it, and "!" clears the list.
	Exclude Kind = iota
	// Include is a pattern to include, otherwise as Exclude.
	Include
	// Filter is a rule with its type: "- PAT", "+ PAT", "P PAT", "!", ...
	Filter
)

// side is where a rule applies: the sending side decides what is sent, the
// receiving side what is protected from deletion.
type side uint8

const (
	sender side = 1 << iota
	receiver
)

type rule struct {
	text    string // the rule in the form Add takes
	include bool
	sides   side // 0: not qualified, both sides (the receiver's unless --delete-excluded)
	negate  bool
	m       matcher
}

// Rules is an ordered list of filter rules. The zero value is an empty
// list, which excludes nothing. Rules must not be added to it while it is
// in use; once built, it is safe to use from several goroutines.
type Rules struct {
	all  []rule
	send []rule // the rules of all that apply to the sending side
}

// Add adds one rule, as rsync's --filter does (see the package doc). An
// empty rule is ignored, as rsync does.
func (r *Rules) Add(rule string) error {
	return r.add(rule, Filter)
}

// AddExclude adds a pattern to exclude, as rsync's --exclude does: a leading
// "+ " or "- " chooses the type of rule after all, "!" clears the list, and
// an empty pattern is ignored.
func (r *Rules) AddExclude(pattern string) error {
	return r.add(pattern, Exclude)
}

// AddInclude adds a pattern to include, as rsync's --include does (see
// AddExclude).
func (r *Rules) AddInclude(pattern string) error {
	return r.add(pattern, Include)
}

func (r *Rules) add(s string, kind Kind) error {
	if s == "" {
		return nil
	}
	var ru rule
	var pat string
	var clear bool
	var err error
	if kind == Filter {
		ru, pat, clear, err = parseRule(s)
	} else {
		ru, pat, clear, err = parsePattern(s, kind == Include)
	}
	if err == nil && clear {
		r.all, r.send = nil, nil
		return nil
	}
	if err == nil {
		ru.m, err = compile(pat, true)
	}
	if err != nil {
		return fmt.Errorf("filter rule %q: %w", s, err)
	}
	ru.text = ruleText(ru, pat)
	r.all = append(r.all, ru)
	if ru.sides == 0 || ru.sides&sender != 0 {
		r.send = append(r.send, ru)
	}
	return nil
}

// longNames are the long rule names, by first letter, and their short forms.
var longNames = map[byte]struct {
	name  string
	short byte
}{
	'c': {"clear", '!'},
	'd': {"dir-merge", ':'},
	'e': {"exclude", '-'},
	'h': {"hide", 'H'},
	'i': {"include", '+'},
	'm': {"merge", '.'},
	'p': {"protect", 'P'},
	'r': {"risk", 'R'},
	's': {"show", 'S'},
}

// parseRule parses a --filter rule as rsync's parse_rule_tok() does. It
// returns the rule without its matcher, the pattern, and whether the rule
// clears the list.
func parseRule(s string) (ru rule, pat string, clear bool, err error) {
	// i ends on the last byte of the rule's name, or on a ',' after it.
	var ch byte
	var i int
	if ln, ok := longNames[s[0]]; ok {
		rest, found := strings.CutPrefix(s, ln.name)
		switch {
		case !found:
			return ru, "", false, errors.New("unknown rule type")
		case rest == "" || rest[0] == ' ' || rest[0] == '_' || isSpace(rest[0]):
			i = len(ln.name) - 1
		case rest[0] == ',':
			i = len(ln.name)
		default:
			return ru, "", false, errors.New("unknown rule type")
		}
		ch = ln.short
	} else {
		ch = s[0]
		if len(s) > 1 && s[1] == ',' {
			i = 1
		}
	}
	byPrefix := false // the type says the side
	switch ch {
	case '-':
	case '+':
		ru.include = true
	case 'H':
		ru.sides, byPrefix = sender, true
	case 'S':
		ru.include, ru.sides, byPrefix = true, sender, true
	case 'P':
		ru.sides, byPrefix = receiver, true
	case 'R':
		ru.include, ru.sides, byPrefix = true, receiver, true
	case '!':
		clear = true
	case '.', ':':
		return ru, "", false, errors.New("merge rules are not supported")
	default:
		return ru, "", false, errors.New("unknown rule type")
	}
	if !clear {
		for i++; i < len(s) && s[i] != ' ' && s[i] != '_'; i++ {
			switch c := s[i]; c {
			case '!':
				ru.negate = true
			case 's', 'r':
				if byPrefix {
					return ru, "", false, fmt.Errorf("invalid modifier %q", c)
				}
				if c == 's' {
					ru.sides |= sender
				} else {
					ru.sides |= receiver
				}
			case '/', 'C', 'p', 'x':
				return ru, "", false, fmt.Errorf("modifier %q is not supported", c)
			default:
				return ru, "", false, fmt.Errorf("invalid modifier %q", c)
			}
		}
	}
	if i < len(s) {
		i++ // the one separator
	}
	pat = s[i:]
	switch {
	case clear && pat != "":
		return ru, "", false, errors.New("'!' takes no pattern")
	case !clear && pat == "":
		return ru, "", false, errors.New("missing pattern")
	}
	return ru, pat, clear, nil
}

// parsePattern parses an --exclude or --include pattern, or a line of an
// --exclude-from or --include-from file.
func parsePattern(s string, include bool) (ru rule, pat string, clear bool, err error) {
	ru.include = include
	switch {
	case strings.HasPrefix(s, "- "):
		ru.include, s = false, s[2:]
	case strings.HasPrefix(s, "+ "):
		ru.include, s = true, s[2:]
	case s == "!":
		return ru, "", true, nil
	}
	if s == "" {
		return ru, "", false, errors.New("missing pattern")
	}
	return ru, s, false, nil
}

// ruleText returns the rule in the form Add takes.
func ruleText(ru rule, pat string) string {
	var b strings.Builder
	if ru.include {
		b.WriteByte('+')
	} else {
		b.WriteByte('-')
	}
	if ru.negate {
		b.WriteByte('!')
	}
	if ru.sides&sender != 0 {
		b.WriteByte('s')
	}
	if ru.sides&receiver != 0 {
		b.WriteByte('r')
	}
	b.WriteByte(' ')
	b.WriteString(pat)
	return b.String()
}

func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// List returns the rules in order, each in the form Add takes, so that
// adding them to an empty Rules rebuilds r (rules cleared by "!" are gone).
func (r *Rules) List() []string {
	if r == nil {
		return nil
	}
	l := make([]string, len(r.all))
	for i, ru := range r.all {
		l[i] = ru.text
	}
	return l
}

// Excluded reports whether the rules leave path out of the transfer. path
// is slash-separated and relative to the root of the transfer, without a
// leading '/' or "./"; isDir says whether it names a directory (a symlink to
// one is not). The first rule for the sending side whose pattern matches
// decides; no match means included. A nil *Rules excludes nothing.
//
// Excluded does not look at the directories above path: a walk must not
// descend into an excluded directory.
func (r *Rules) Excluded(path string, isDir bool) bool {
	if r == nil || len(r.send) == 0 || path == "" {
		return false
	}
	base := path[strings.LastIndexByte(path, '/')+1:]
	for i := range r.send {
		ru := &r.send[i]
		if ru.m.match(path, base, isDir) != ru.negate {
			return !ru.include
		}
	}
	return false
}

// Protected reports whether a receiver deleting what the source does not
// have must leave path alone. The first rule for the receiving side whose
// pattern matches decides: an exclude or a "P" rule protects, an include or
// an "R" rule does not. An unqualified exclude or include applies to both
// sides, so what is excluded from the transfer is protected from deletion
// too, unless deleteExcluded (rsync's --delete-excluded) makes it apply to
// the sending side only. No match means not protected.
func (r *Rules) Protected(path string, isDir, deleteExcluded bool) bool {
	if r == nil || path == "" {
		return false
	}
	base := path[strings.LastIndexByte(path, '/')+1:]
	for i := range r.all {
		ru := &r.all[i]
		if ru.sides&receiver == 0 && (ru.sides != 0 || deleteExcluded) {
			continue
		}
		if ru.m.match(path, base, isDir) != ru.negate {
			return !ru.include
		}
	}
	return false
}
