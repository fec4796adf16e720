package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// The help and completion commands read the table of commands, so they
// join the table once that is made.
func init() {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == "version" })
	commands = slices.Insert(commands, i+1, command{name: "help",
		summary: "print the help of the move, of a COMMAND, or of one section of the move's flags",
		head:    "usage: bulkmove help [COMMAND | SECTION]\n", setup: helpFlags},
		command{name: "completion", summary: "write a completion script for bash, zsh or fish",
			head: completionUsage, setup: completionFlags})
}

// helpFlags is bulkmove help [COMMAND | SECTION]: the move's help, a
// command's, or one section of the move's flags (bulkmove help filters).
func helpFlags(fs *pflag.FlagSet) func(*call) int {
	return func(x *call) int {
		if len(x.args) > 1 {
			termsafe.Errorf(x.stderr, "help: one topic at a time (see bulkmove help)")
			return exitUsage
		}
		topic := ""
		if len(x.args) == 1 {
			topic = x.args[0]
		}
		target, only := &commands[0], ""
		switch {
		case topic == "":
		case slices.ContainsFunc(sections, func(s struct{ name, title string }) bool { return s.name == topic && s.name != "" }):
			only = topic
		default:
			c, _ := commandFor([]string{topic})
			if c.name != topic && !contains(c.aliases, topic) || c.internal {
				termsafe.Errorf(x.stderr, "help: no topic %q; topics: %s", topic, strings.Join(helpTopics(), ", "))
				return exitUsage
			}
			target = c
		}
		tfs, _, _ := target.flagSet()
		if only != "" {
			fmt.Fprintf(x.stdout, "bulkmove's flags: %s\n", only)
		}
		target.help(x.stdout, tfs, only)
		return exitOK
	}
}

// helpTopics lists what bulkmove help takes: the user's commands and the
// sections of the move's flags.
func helpTopics() []string {
	var t []string
	for _, c := range commands {
		if c.name != "" && !c.internal {
			t = append(t, c.name)
		}
	}
	for _, s := range sections {
		if s.name != "" {
			t = append(t, s.name)
		}
	}
	return t
}
