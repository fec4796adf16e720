package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Flag values of the command line's own: each refuses what it cannot
// mean, naming what it takes, so that --progress=bogus is a usage error
// and not a silent default.

// choice is a string flag that takes one of a fixed set of words.
type choice struct {
	v     *string
	words []string
}

func newChoice(v *string, words ...string) *choice { return &choice{v, words} }

func (c *choice) String() string { return *c.v }
func (c *choice) Type() string   { return strings.Join(c.words, "|") }

func (c *choice) Set(s string) error {
	if !slices.Contains(c.words, s) {
		return fmt.Errorf("want %s", orList(c.words))
	}
	*c.v = s
	return nil
}

// orList writes words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// info is rsync's --info=FLAGS, of which bulkmove has the progress
// levels: progress2 and progress1 show the progress line (bulkmove's is
// always rsync's whole-transfer progress2), progress0 none. Any other
// flag is refused rather than ignored: a script that asks rsync for a
// report expects it.
type info struct{ progress *string }

func newInfo(progress *string) *info { return &info{progress} }

func (i *info) String() string { return "" }
func (i *info) Type() string   { return "FLAGS" }

func (i *info) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "progress", "progress1", "progress2":
			*i.progress = "auto"
		case "progress0":
			*i.progress = "none"
		default:
			return fmt.Errorf("%q: bulkmove takes progress0, progress1 and progress2 of rsync's --info flags", f)
		}
	}
	return nil
}

// bothFlags is a boolean flag that sets two others: -D, rsync's
// --devices --specials.
type bothFlags struct{ a, b *bool }

func (v bothFlags) String() string {
	return strconv.FormatBool(v.a != nil && *v.a && *v.b)
}
func (v bothFlags) Type() string     { return "bool" }
func (v bothFlags) IsBoolFlag() bool { return true }

func (v bothFlags) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*v.a, *v.b = on, on
	return nil
}

// remoteOption is rsync's -M (--remote-option), which passes an option
// to the remote rsync: bulkmove's remote end takes --fake-super, and
// --super (not fake: a local move's DEST, with --fake-super).
type remoteOption struct{ fakeSuper, super *bool }

func (v remoteOption) String() string {
	switch {
	case v.fakeSuper != nil && *v.fakeSuper:
		return "--fake-super"
	case v.super != nil && *v.super:
		return "--super"
	}
	return ""
}
func (v remoteOption) Type() string { return "option" }

func (v remoteOption) Set(s string) error {
	switch s {
	case "--fake-super":
		*v.fakeSuper, *v.super = true, false
	case "--super":
		*v.fakeSuper, *v.super = false, true
	default:
		return fmt.Errorf("%q: the remote end takes only --fake-super and --super", s)
	}
	return nil
}

// verboseCount is -v, and with count -h, which repeat as rsync's do
// (-vv, -hh): for -v any count turns on the engine's one verbose level,
// which already lists every batch; -h's count is rsync's level.
type verboseCount struct {
	on    *bool
	count *int // if set, takes the count (-hh)
	n     int
}

func (v *verboseCount) String() string { return strconv.Itoa(v.n) }
func (v *verboseCount) Type() string   { return "count" }

func (v *verboseCount) Set(s string) error {
	switch b, berr := strconv.ParseBool(s); {
	case s == "+1":
		v.n++
	case berr == nil: // verbose = true in the config file, BULKMOVE_VERBOSE=1
		v.n = 0
		if b {
			v.n = 1
		}
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want true, false or a count of 0 or more")
		}
		v.n = n
	}
	if v.on != nil {
		*v.on = v.n > 0
	}
	if v.count != nil {
		*v.count = v.n
	}
	return nil
}

// suffixFlag is --suffix: a string that may be set to "", told apart
// from one not given (nil: rsync's default, which depends on
// --backup-dir).
type suffixFlag struct{ v **string }

func (s *suffixFlag) String() string {
	if s.v == nil || *s.v == nil {
		return ""
	}
	return **s.v
}

func (s *suffixFlag) Type() string { return "string" }

func (s *suffixFlag) Set(v string) error {
	*s.v = &v
	return nil
}
