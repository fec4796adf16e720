package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The help is read from the flag sets themselves: each flag is registered
// inside a section (section), and --help, `bulkmove help SECTION`, the
// man page and the shell completions all list the same flags, once each,
// with their shorthands.

// Annotation keys on a flag.
const (
	annSection = "bulkmove-section" // the help section the flag is listed in
	annImplied = "bulkmove-implied" // an rsync flag for what bulkmove always does
	annValue   = "bulkmove-value"   // the name of the flag's value, where its usage cannot say it
)

// sections are the help's sections, in the order it lists them.
var sections = []struct{ name, title string }{
	{"common", "Common"},
	{"comparison", "Which files are sent"},
	{"filters", "Which paths are moved"},
	{"deletion", "Deletion"},
	{"kept", "What is kept"},
	{"transport", "Transport: SSH, TLS, TCP, bulkmove serve"},
	{"performance", "Performance"},
	{"output", "Output"},
	{"operations", "Operations: resume, retries, metrics, config"},
	{"implied", "rsync's flags for what bulkmove always does (accepted; they change nothing)"},
	{"", "Flags"}, // a command's own flags, outside the move's sections
}

// section registers, under the help section name, the flags that
// register adds to fs.
func section(fs *pflag.FlagSet, name string, register func()) {
	before := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
	register()
	fs.VisitAll(func(f *pflag.Flag) {
		if !before[f.Name] {
			fs.SetAnnotation(f.Name, annSection, []string{name})
		}
	})
}

// sectionOf is the help section f is listed in ("" for none).
func sectionOf(f *pflag.Flag) string {
	if s := f.Annotations[annSection]; len(s) > 0 {
		return s[0]
	}
	return ""
}

// helpWidth is the width the help is written for: within an 80-column
// terminal, whose cursor wraps at its last column.
const helpWidth = 79

// printFlags lists fs's flags by section: only the section named, if
// only is not empty.
func printFlags(w io.Writer, fs *pflag.FlagSet, only string) {
	for _, s := range sections {
		if only != "" && s.name != only {
			continue
		}
		var b strings.Builder
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && sectionOf(f) == s.name {
				writeFlag(&b, f)
			}
		})
		if b.Len() > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", s.title, b.String())
		}
	}
}

// flagColumn is where a flag's description starts.
const flagColumn = 30

// writeFlag writes one flag: its shorthand, long name and value, then what
// it does, wrapped, with its default where that is not the zero value.
func writeFlag(b *strings.Builder, f *pflag.Flag) {
	head := flagSynopsis(f)
	text := usageOf(f)
	if d := defaultOf(f); d != "" {
		text += " (default " + d + ")"
	}
	lines := wrap(text, helpWidth-flagColumn)
	if len(head) >= flagColumn-1 {
		b.WriteString(head + "\n")
		head = ""
	}
	for i, l := range lines {
		if i > 0 {
			head = ""
		}
		fmt.Fprintf(b, "%-*s%s\n", flagColumn, head, l)
	}
}

// flagSynopsis is "  -j, --jobs=N|auto": how the flag is typed.
func flagSynopsis(f *pflag.Flag) string {
	s := "      --" + f.Name
	if f.Shorthand != "" {
		s = "  -" + f.Shorthand + ", --" + f.Name
	}
	switch v := valueName(f); {
	case v == "":
	case optionalValue(f):
		s += "[=" + v + "]"
	default:
		s += "=" + v
	}
	return s
}

// valueName names the value a flag takes ("" for none): the word the
// usage quotes in backticks, else its type's.
func valueName(f *pflag.Flag) string {
	if v := f.Annotations[annValue]; len(v) > 0 {
		return v[0]
	}
	name, _ := pflag.UnquoteUsage(f)
	switch t := f.Value.Type(); {
	case strings.Contains(name, "|"): // words to type as they are
		return name
	case t == "bool" || t == "count":
		return ""
	case strings.Contains(t, "|"): // a choice: its words
		return t
	case name == "string" || name == "int":
		return strings.ToUpper(map[string]string{"string": "VALUE", "int": "N"}[name])
	case name == "duration":
		return "DURATION"
	}
	return strings.ToUpper(name)
}

// usageOf is the flag's description, without the backticks that name
// its value.
func usageOf(f *pflag.Flag) string {
	_, u := pflag.UnquoteUsage(f)
	return u
}

// defaultOf is the flag's default for people: "" where it is the zero
// value or says nothing ("0", false, an empty list), durations as 5m, not
// 5m0s.
func defaultOf(f *pflag.Flag) string {
	d := f.DefValue
	if len(f.Annotations[annImplied]) > 0 || f.Value.Type() == "count" {
		return ""
	}
	switch d {
	case "", "0", "0s", "0B", "false", "[]", "map[]":
		return ""
	}
	if f.Value.Type() == "duration" {
		if t, err := time.ParseDuration(d); err == nil {
			return shortDuration(t)
		}
	}
	return d
}

// shortDuration writes d without its zero parts: 5m, 1h30m, 10s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// wrap cuts text into lines of at most width columns, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}

// suggest returns up to three of fs's long flag names nearest to the
// unknown name typed: those it starts, and those a typo or two away.
func suggest(fs *pflag.FlagSet, typed string) []string {
	type near struct {
		name string
		d    int
	}
	var found []near
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(typed, f.Name)
		switch {
		case len(typed) >= 3 && strings.HasPrefix(f.Name, typed):
			found = append(found, near{f.Name, 0})
		case d <= max(1, min(3, len(typed)/3)):
			found = append(found, near{f.Name, d})
		}
	})
	slices.SortStableFunc(found, func(a, b near) int { return a.d - b.d })
	var names []string
	for _, n := range found[:min(3, len(found))] {
		names = append(names, "--"+n.name)
	}
	return names
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
