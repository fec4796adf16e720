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
// # Merge files
//
// A merge rule (". FILE") reads FILE's rules into the list where the rule
// is, when it is added; a dir-merge rule (": FILE") stands for the rules of
// the file of that name in each directory a walk enters, before those
// inherited from the directories above (Dir, Scopes). Their modifiers are
// rsync's: "-" and "+" (the file holds patterns to exclude or include),
// "C" (a .cvsignore: "n", "w" and "-", and "!" clears), "e" (the file
// itself is excluded), "n" (not inherited), "w" (split on whitespace), "s",
// "r" and "/" for the rules read. "-C" adds rsync's CVS excludes.
//
// # Differences from rsync
//
// The modifiers "p" and "x" are not supported: Add returns an error for
// them. A per-directory file may not hold a merge rule, nor a dir-merge
// rule for a file not already in force (rsync reads them). rsync accepts a wildcard
// pattern that can never match (an unterminated "[", an unknown
// "[:name:]", a trailing '\'), and a pattern that is only '/'; Add rejects
// them.
package filter

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
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
	abs     bool // matched against the absolute path on disk ('/' modifier)
	m       matcher
	merge   *dirMerge // a dir-merge rule: the rules of the per-directory files take its place
}

// Rules is an ordered list of filter rules. The zero value is an empty
// list, which excludes nothing. Rules must not be added to it while it is
// in use; once built, it is safe to use from several goroutines.
type Rules struct {
	all    []rule
	send   []rule      // the rules of all that apply to the sending side
	merges []*dirMerge // the dir-merge rules of all, in order
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
	var err error
	if kind == Filter {
		err = r.addTok(&r.all, s, tmpl{}, nil)
	} else {
		var ru rule
		var pat string
		var clear bool
		ru, pat, clear, err = parsePattern(s, kind == Include)
		switch {
		case err == nil && clear:
			r.all = nil
		case err == nil:
			err = addRule(&r.all, ru, pat, nil)
		}
	}
	r.index()
	if err != nil {
		return fmt.Errorf("filter rule %q: %w", s, err)
	}
	return nil
}

// index rebuilds send and merges from all.
func (r *Rules) index() {
	r.send, r.merges = r.send[:0], r.merges[:0]
	for i := range r.all {
		ru := &r.all[i]
		if ru.merge != nil {
			ru.merge.idx = len(r.merges)
			r.merges = append(r.merges, ru.merge)
		}
		if ru.sides == 0 || ru.sides&sender != 0 {
			r.send = append(r.send, *ru)
		}
	}
}

// addRule compiles the pattern of ru and appends it to list. An anchored
// pattern of a per-directory file (in) is anchored at its directory.
func addRule(list *[]rule, ru rule, pat string, in *fileCtx) error {
	if in != nil && in.perDir && pat[0] == '/' && !ru.abs {
		pat, ru.abs = in.anchor(pat)
	}
	var err error
	ru.m, err = compile(pat, true)
	if err != nil {
		return err
	}
	ru.text = ruleText(ru, pat)
	*list = append(*list, ru)
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

// tmpl is how the rules of a merge file are read (rsync's rule template):
// the modifiers of the merge rule that named the file.
type tmpl struct {
	include   bool // '+': the lines are patterns to include
	noPrefix  bool // '-' or '+': the lines are patterns, not rules
	wordSplit bool // 'w': split on whitespace, no comments
	cvs       bool // 'C': as noPrefix, wordSplit and noInherit, and "!" clears
	noInherit bool // 'n': not inherited by subdirectories
	exclSelf  bool // 'e': the merge file's name is excluded
	abs       bool // '/': the rules are matched against absolute paths
	sides     side
}

// op is what a parsed rule does.
type op uint8

const (
	opRule  op = iota // an include or exclude
	opClear           // "!": empty the list
	opMerge           // ".": read a file's rules into the list now
	opDir             // ":": read a file's rules in each directory
	opCVS             // "-C": rsync's CVS excludes
)

// parseTok parses one rule read with template t, as rsync's
// parse_rule_tok() does. It returns the rule without its matcher and the
// pattern (for a merge rule, the file's name and in mt how it is read).
func parseTok(s string, t tmpl) (ru rule, pat string, what op, mt tmpl, err error) {
	ru.include, ru.abs = t.include, t.abs
	i := -1 // the last byte of the rule's type and modifiers
	if t.noPrefix {
		if s == "!" && t.cvs {
			return ru, "", opClear, mt, nil
		}
		pat = s
	} else {
		var ch byte
		i = 0
		if ln, ok := longNames[s[0]]; ok {
			rest, found := strings.CutPrefix(s, ln.name)
			switch {
			case !found:
				return ru, "", 0, mt, errors.New("unknown rule type")
			case rest == "" || rest[0] == ' ' || rest[0] == '_' || isSpace(rest[0]):
				i = len(ln.name) - 1
			case rest[0] == ',':
				i = len(ln.name)
			default:
				return ru, "", 0, mt, errors.New("unknown rule type")
			}
			ch = ln.short
		} else {
			ch = s[0]
			if len(s) > 1 && s[1] == ',' {
				i = 1
			}
		}
		byPrefix := false // the type says the side
		ru.include = false
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
			what = opClear
		case '.':
			what = opMerge
		case ':':
			what = opDir
		default:
			return ru, "", 0, mt, errors.New("unknown rule type")
		}
		merge := what == opMerge || what == opDir
		if what != opClear {
			for i++; i < len(s) && s[i] != ' ' && s[i] != '_'; i++ {
				if t.wordSplit && isSpace(s[i]) {
					i--
					break
				}
				switch c := s[i]; c {
				case '-', '+':
					if !merge || mt.noPrefix {
						return ru, "", 0, mt, fmt.Errorf("invalid modifier %q", c)
					}
					mt.noPrefix, mt.include = true, c == '+'
				case '/':
					ru.abs = true
				case '!':
					if merge {
						return ru, "", 0, mt, fmt.Errorf("invalid modifier %q", c)
					}
					ru.negate = true
				case 'C':
					if mt.noPrefix || byPrefix {
						return ru, "", 0, mt, fmt.Errorf("invalid modifier %q", c)
					}
					mt.noPrefix, mt.wordSplit, mt.noInherit, mt.cvs = true, true, true, true
				case 'e', 'n', 'w':
					if !merge {
						return ru, "", 0, mt, fmt.Errorf("invalid modifier %q", c)
					}
					switch c {
					case 'e':
						mt.exclSelf = true
					case 'n':
						mt.noInherit = true
					default:
						mt.wordSplit = true
					}
				case 's', 'r':
					if byPrefix {
						return ru, "", 0, mt, fmt.Errorf("invalid modifier %q", c)
					}
					if c == 's' {
						ru.sides |= sender
					} else {
						ru.sides |= receiver
					}
				case 'p', 'x':
					return ru, "", 0, mt, fmt.Errorf("modifier %q is not supported", c)
				default:
					return ru, "", 0, mt, fmt.Errorf("invalid modifier %q", c)
				}
			}
		}
		if i < len(s) {
			i++ // the one separator
		}
		pat = s[i:]
	}
	if t.sides != 0 {
		if ru.sides != 0 {
			return ru, "", 0, mt, errors.New("a merge file for one side holds a rule for a side")
		}
		ru.sides = t.sides
	}
	if t.wordSplit {
		if j := strings.IndexFunc(pat, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }); j >= 0 {
			pat = pat[:j]
		}
	}
	if what == opRule && mt.cvs {
		what = opCVS // "-C": the CVS excludes, in its place
		if pat != "" {
			return ru, "", 0, mt, errors.New("'C' takes no pattern")
		}
	}
	switch {
	case what == opClear && pat != "":
		return ru, "", 0, mt, errors.New("'!' takes no pattern")
	case what == opRule && pat == "":
		return ru, "", 0, mt, errors.New("missing pattern")
	case (what == opMerge || what == opDir) && pat == "":
		if !mt.cvs {
			return ru, "", 0, mt, errors.New("missing file name")
		}
		pat = ".cvsignore"
	}
	mt.abs, mt.sides = ru.abs, ru.sides
	return ru, pat, what, mt, nil
}

// fileCtx is the file a rule was read from.
type fileCtx struct {
	name   string // for errors
	perDir bool   // a per-directory file: anchored patterns are relative to its directory
	// anchor turns an anchored pattern of a per-directory file into one
	// anchored at the top of the tree, or an absolute one.
	anchor func(pat string) (string, bool)
	merges []*dirMerge // the dir-merge rules in force (a per-directory file's own ':' rules must be one of them)
	depth  int         // merge files within merge files
	clear  func()      // a per-directory file's "!": it also clears what the directory inherits
	secret bool        // an error names the line, not what it holds
}

// maxMergeDepth bounds merge files that name each other.
const maxMergeDepth = 32

// addTok parses the rule s, read with template t from the file in (nil:
// the command line), and adds what it says to list.
func (r *Rules) addTok(list *[]rule, s string, t tmpl, in *fileCtx) error {
	ru, pat, what, mt, err := parseTok(s, t)
	if err != nil {
		return err
	}
	switch what {
	case opClear:
		*list = (*list)[:0:0]
		if in != nil && in.clear != nil {
			in.clear()
		}
		return nil
	case opCVS:
		return addCVS(list, ru)
	case opRule:
		return addRule(list, ru, pat, in)
	}
	if mt.exclSelf {
		// As rsync: the base name, excluded anywhere.
		if err := addRule(list, rule{}, pat[strings.LastIndexByte(pat, '/')+1:], nil); err != nil {
			return err
		}
		mt.exclSelf = false
	}
	if in != nil && in.perDir {
		if what == opMerge {
			return errors.New("a merge rule in a per-directory file is not supported")
		}
		base := pat[strings.LastIndexByte(pat, '/')+1:]
		for _, m := range in.merges {
			if m.name == base {
				return nil // already in force, as rsync
			}
		}
		return errors.New("a dir-merge rule in a per-directory file is not supported, but for one already in force")
	}
	if what == opDir {
		base := pat[strings.LastIndexByte(pat, '/')+1:]
		for i := range *list {
			if m := (*list)[i].merge; m != nil && m.name == base {
				return nil // already in the list: rsync ignores it
			}
		}
		m := &dirMerge{given: pat, name: base, t: mt}
		text := ":" + mt.modifiers() + " " + pat
		*list = append(*list, rule{text: text, sides: 0, merge: m})
		return nil
	}
	// A merge file, read now.
	depth := 0
	if in != nil {
		depth = in.depth + 1
	}
	if depth > maxMergeDepth {
		return fmt.Errorf("merge file %s: merge files nested more than %d deep", pat, maxMergeDepth)
	}
	var rd io.Reader
	if pat == "-" {
		rd = os.Stdin
	} else {
		f, err := os.Open(pat)
		if err != nil {
			return fmt.Errorf("merge file: %w", err)
		}
		defer f.Close()
		rd = f
	}
	return r.readRules(list, rd, mt, &fileCtx{name: pat, depth: depth})
}

// modifiers returns the modifiers that read a merge file with t.
func (t tmpl) modifiers() string {
	var b strings.Builder
	if t.abs {
		b.WriteByte('/')
	}
	if t.cvs {
		b.WriteByte('C')
	} else {
		if t.noInherit {
			b.WriteByte('n')
		}
		if t.wordSplit {
			b.WriteByte('w')
		}
		if t.noPrefix {
			if t.include {
				b.WriteByte('+')
			} else {
				b.WriteByte('-')
			}
		}
	}
	if t.sides&sender != 0 {
		b.WriteByte('s')
	}
	if t.sides&receiver != 0 {
		b.WriteByte('r')
	}
	return b.String()
}

// readRules reads the rules of a merge file from rd into list, as rsync's
// parse_filter_file(): a line ends at "\n" or "\r"; empty lines and, unless
// t.wordSplit, lines starting with '#' or ';' are ignored; with
// t.wordSplit each word is a rule. An error names the file and the line.
func (r *Rules) readRules(list *[]rule, rd io.Reader, t tmpl, in *fileCtx) error {
	br := bufio.NewReader(rd)
	for n := 1; ; n++ {
		line, rerr := br.ReadString('\n')
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("%s: %w", in.name, rerr)
		}
		line = strings.TrimSuffix(line, "\n")
		for _, p := range strings.Split(line, "\r") {
			toks := []string{p}
			if t.wordSplit {
				toks = strings.Fields(p)
			}
			for _, tok := range toks {
				if tok == "" || (!t.wordSplit && (tok[0] == '#' || tok[0] == ';')) {
					continue
				}
				if err := r.addTok(list, tok, t, in); err != nil {
					if in.secret {
						return fmt.Errorf("%s line %d: not a filter rule bulkmove reads", in.name, n)
					}
					return fmt.Errorf("%s line %d: filter rule %q: %w", in.name, n, tok, err)
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
	}
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
	if ru.abs {
		b.WriteByte('/')
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
// descend into an excluded directory. It knows no per-directory rules
// (dir-merge): a walk with those asks the Dir of path's directory.
func (r *Rules) Excluded(path string, isDir bool) bool {
	if r == nil || len(r.send) == 0 || path == "" {
		return false
	}
	return r.excluded(path, isDir, nil, "")
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
	return r.protected(path, isDir, deleteExcluded, nil, "")
}
