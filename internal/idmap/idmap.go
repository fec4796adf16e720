// Package idmap maps owners as rsync's --usermap, --groupmap and --chown
// do: rules parsed on both sides (the sender to refuse a bad one early and
// to know whether names must travel, the receiver because it trusts
// nothing its sender says), their TO names resolved by the receiver's name
// service, their FROM names matched against the sender's names; and each
// side's name service (Names), asked through getent where there is one.
package idmap

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bulkmove/bulkmove/filter"
)

// MaxName is the longest user or group name that travels (rsync's).
const MaxName = 255

// Map is one --usermap or --groupmap: its rules, first match wins.
type Map struct {
	Flag  string // "--usermap", "--groupmap": for errors
	rules []rule
}

type ruleKind int

const (
	byID    ruleKind = iota // N
	byRange                 // LOW-HIGH
	byName                  // a name ("" for ids without one)
	byWild                  // a name with *, ? or [
)

type rule struct {
	kind   ruleKind
	lo, hi uint32
	name   string
	to     string // as given: a name or a number
	toID   uint32 // resolved (Resolve)
}

// Parse parses a map's FROM:TO pairs, rsync's syntax: FROM is a number, a
// range LOW-HIGH, a name (the empty name: ids that have none), or a
// wildcard (*, ?, [...]) matched against the sender's names; TO is a name
// on the receiver or a number.
func Parse(flag, s string) (*Map, error) {
	m := &Map{Flag: flag}
	for _, item := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("%s %q: no colon in %q", flag, s, item)
		}
		if to == "" {
			return nil, fmt.Errorf("%s %q: no name after the colon in %q", flag, s, item)
		}
		if err := checkName(to); err != nil {
			return nil, fmt.Errorf("%s %q: %q: %v", flag, s, to, err)
		}
		r := rule{to: to}
		switch {
		case from != "" && from[0] >= '0' && from[0] <= '9':
			lo, hi, isRange := strings.Cut(from, "-")
			a, err1 := parseID(lo)
			b, err2 := a, error(nil)
			if isRange {
				b, err2 = parseID(hi)
			}
			if err1 != nil || err2 != nil || b < a {
				return nil, fmt.Errorf("%s %q: invalid number or range %q", flag, s, from)
			}
			r.kind, r.lo, r.hi = byID, a, b
			if isRange {
				r.kind = byRange
			}
		case strings.ContainsAny(from, "*?["):
			r.kind, r.name = byWild, from
		default:
			if err := checkName(from); err != nil && from != "" {
				return nil, fmt.Errorf("%s %q: %q: %v", flag, s, from, err)
			}
			r.kind, r.name = byName, from
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

func parseID(s string) (uint32, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a number")
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}

// checkName refuses what no name service holds and what would not travel.
func checkName(s string) error {
	switch {
	case len(s) > MaxName:
		return fmt.Errorf("longer than %d bytes", MaxName)
	case strings.ContainsAny(s, ":,\x00\n"):
		return fmt.Errorf("a name holds no ':', ',', newline or NUL")
	}
	return nil
}

// ValidName reports whether name can travel as an owner's name and be
// looked up: not empty, at most MaxName bytes, no ':', ',', newline or NUL.
func ValidName(name string) bool { return name != "" && checkName(name) == nil }

// NeedsNames reports whether a rule matches the sender's names, which must
// then travel with the ids.
func (m *Map) NeedsNames() bool {
	if m == nil {
		return false
	}
	for _, r := range m.rules {
		if r.kind == byName || r.kind == byWild {
			return true
		}
	}
	return false
}

// Resolve resolves each rule's TO on the receiver: a number as it is, a
// name by lookup (its name service); a name it does not know refuses the
// map (rsync drops the rule with a message, which a migration would miss).
func (m *Map) Resolve(lookup func(name string) (uint32, bool)) error {
	for i := range m.rules {
		r := &m.rules[i]
		if id, err := parseID(r.to); err == nil {
			r.toID = id
			continue
		}
		id, ok := lookup(r.to)
		if !ok {
			what := "user"
			if m.Flag == "--groupmap" {
				what = "group"
			}
			return fmt.Errorf("%s: no %s %q on the receiver", m.Flag, what, r.to)
		}
		r.toID = id
	}
	return nil
}

// Match returns the id that id (named name by the sender, "" for none)
// maps to, and whether a rule matched.
func (m *Map) Match(id uint32, name string) (uint32, bool) {
	if m == nil {
		return id, false
	}
	for _, r := range m.rules {
		var hit bool
		switch r.kind {
		case byID:
			hit = id == r.lo
		case byRange:
			hit = r.lo <= id && id <= r.hi
		case byName:
			hit = name == r.name
		case byWild:
			hit = filter.Wildmatch(r.name, name)
		}
		if hit {
			return r.toID, true
		}
	}
	return id, false
}

// Chown splits --chown's USER:GROUP into the --usermap and --groupmap it
// stands for ("*:USER", "*:GROUP"; "" for a part not given), as rsync:
// USER, USER:, :GROUP and USER:GROUP.
func Chown(s string) (usermap, groupmap string) {
	user, group, _ := strings.Cut(s, ":")
	if user != "" {
		usermap = "*:" + user
	}
	if group != "" {
		groupmap = "*:" + group
	}
	return usermap, groupmap
}
