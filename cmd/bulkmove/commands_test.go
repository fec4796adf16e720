package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// Every command registers its flags without a clash (pflag panics on a
// name or shorthand given twice, when the command runs), has a summary,
// and answers to names no other command takes.
func TestCommandTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands {
		for _, n := range append([]string{c.name}, c.aliases...) {
			if seen[n] {
				t.Errorf("command name %q twice", n)
			}
			seen[n] = true
		}
		if c.summary == "" || c.setup == nil {
			t.Errorf("command %q: no summary or no setup", c.name)
		}
		fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
		if c.setup(fs) == nil {
			t.Errorf("command %q: setup returned no run", c.name)
		}
		// --help is every command's (addHelp), and -h too where it is not
		// rsync's --human-readable.
		if fs.Lookup("help") != nil {
			t.Errorf("command %q: --help is addHelp's", c.name)
		}
		if h := fs.ShorthandLookup("h"); h != nil && h.Name != "human-readable" {
			t.Errorf("command %q: -h is --%s", c.name, h.Name)
		}
		// Every flag of the move and of verify is in a help section.
		full, _, _ := c.flagSet()
		full.VisitAll(func(f *pflag.Flag) {
			if c.name == "" && sectionOf(f) == "" {
				t.Errorf("the move's --%s is in no help section", f.Name)
			}
		})
	}
	if commands[0].name != "" {
		t.Errorf("the first command is %q, want the move (no name)", commands[0].name)
	}
}
