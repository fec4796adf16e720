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
		if fs.Lookup("help") != nil || fs.ShorthandLookup("h") != nil {
			t.Errorf("command %q: -h and --help are the help's", c.name)
		}
	}
	if commands[0].name != "" {
		t.Errorf("the first command is %q, want the move (no name)", commands[0].name)
	}
}
