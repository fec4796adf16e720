package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/wire"
)

// The subcommand scaffold: every command of bulkmove is a row of commands,
// run parses its command line with a flag set of its own, so a command
// accepts its own flags and no other's, and a usage error reads the same
// in every command.

// A command is one subcommand of bulkmove.
type command struct {
	name    string   // what follows "bulkmove"; "" is the move, which has no name
	aliases []string // other names it answers to
	summary string   // what it does, in a line (the move's --help lists them)
	// internal commands are started by bulkmove itself, over SSH or as a
	// child, with command lines built in fixed forms (transport/ssh,
	// internal/engine): not by hand, and not listed in the help.
	internal bool
	// head and tail are the --help text above and below the flags; with
	// hideFlags, head says all (agent: its text names its flags).
	head, tail string
	hideFlags  bool
	// setup registers the command's flags on fs and returns the command's
	// run function, which reads the values they were parsed into.
	setup func(fs *pflag.FlagSet) func(c *call) int
	// defaults, if set, gives flags to parse before the command line (a
	// config file's), and operands to take if the command line gives
	// none; an error is a usage error.
	defaults func(fs *pflag.FlagSet, line []string) (flags, operands []string, err error)
	// env: the command reads BULKMOVE_<FLAG> variables (envDefaults);
	// never an internal one.
	env bool
}

// A call is one run of a command.
type call struct {
	name   string   // "bulkmove verify": the command as messages name it
	args   []string // the operands: what the flags left
	line   []string // the command line after the command's name
	preset []string // the flags the environment and the config file set, as a command line's words
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// commands are bulkmove's subcommands, the move (no name) first.
var commands = []command{
	{name: "", summary: "move SRC into DEST: here, pushed or pulled over SSH, or to a bulkmove serve",
		head: moveUsage, tail: exitCodesHelp, setup: moveFlags, defaults: configDefaults, env: true},
	{name: "verify", summary: "compare SRC with DEST as a move would leave it, writing nothing",
		head: verifyUsage, setup: verifyFlags, env: true},
	{name: "verify-summary", summary: "merge the --json reports of sharded verify runs into one",
		head: verifySummaryUsage, setup: verifySummaryFlags},
	{name: "plan", summary: "write N balanced part files of SRC, for --files-from on N hosts",
		head: planUsage, setup: planFlags, env: true},
	{name: "serve", summary: "run the receiver as a standing TLS daemon",
		head: serveUsage, setup: serveFlags},
	{name: "version", summary: "print the version (--proto: the protocol's)",
		head: "usage: bulkmove version [--proto]\n", setup: versionFlags},
	{name: wire.CmdAgent, internal: true, summary: "the receiving end that a push starts",
		head: agentUsage, hideFlags: true, setup: agentFlags},
	{name: wire.CmdSendHub, internal: true, summary: "the sending end that a pull starts",
		head: hubUsage, setup: hubFlags},
	{name: wire.CmdJoin, internal: true, summary: "relay a stream to a hub's socket",
		head: joinUsage, setup: joinFlags},
	{name: wire.CmdR2RSend, internal: true, summary: "the sending end that a remote-to-remote move starts",
		head: r2rUsage, setup: r2rSendFlags},
}

// commandFor finds the command that args name, and the rest of args: the
// move if args[0] names none.
func commandFor(args []string) (*command, []string) {
	if len(args) > 0 {
		for i := range commands {
			c := &commands[i]
			if c.name != "" && (args[0] == c.name || contains(c.aliases, args[0])) {
				return c, args[1:]
			}
		}
	}
	return &commands[0], args
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// run runs the command that args name and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, line := commandFor(args)
	name := strings.TrimSpace("bulkmove " + cmd.name)
	fs, runCmd, help := cmd.flagSet()
	fs.Usage = func() { cmd.help(stderr, fs, "") } // a command's own "wrong operands"
	c := &call{name: name, line: line, stdin: stdin, stdout: stdout, stderr: stderr}
	// A usage error: one line on stderr, and for a move with --json the
	// end event a script waits for.
	refuse := func(err error) int {
		termsafe.Errorf(stderr, "%v", err)
		if cmd.name == "" && wantsJSON(fs, line) {
			event.WriteUsageEnd(stdout, err, exitUsage)
		}
		return exitUsage
	}
	var operands []string
	if cmd.env && !cmd.internal {
		if err := envDefaults(fs, os.Environ()); err != nil {
			return refuse(err)
		}
	}
	if cmd.defaults != nil {
		flags, ops, err := cmd.defaults(fs, line)
		if err != nil {
			return refuse(err)
		}
		if err := fs.Parse(flags); err != nil {
			return refuse(fmt.Errorf("config: %s", flagError(fs, err)))
		}
		operands = ops
	}
	// What the line did not say, for --log-file's header.
	fs.Visit(func(f *pflag.Flag) {
		switch v := f.Value.String(); {
		case f.Value.Type() == "bool" && v == "true":
			c.preset = append(c.preset, "--"+f.Name)
		case f.Value.Type() == "bool":
			c.preset = append(c.preset, "--"+f.Name+"="+v)
		default:
			c.preset = append(c.preset, "--"+f.Name, v)
		}
	})
	if err := fs.Parse(line); err != nil {
		// One line: what was wrong and where the help is (termsafe
		// names bulkmove, and the command is named after it).
		prefix := ""
		if cmd.name != "" {
			prefix = cmd.name + ": "
		}
		return refuse(fmt.Errorf("%s%s (see %s --help)", prefix, flagError(fs, err), name))
	}
	c.args = fs.Args()
	// -h alone is the help, as in rsync, where -h is --human-readable.
	if *help || len(c.args) == 0 && len(operands) == 0 && fs.Changed("human-readable") {
		cmd.help(stdout, fs, "")
		return exitOK
	}
	if len(c.args) == 0 {
		c.args = operands
	}
	if hint := detachedValue(fs, line); hint != "" {
		return refuse(fmt.Errorf("%s (see %s --help)", hint, name))
	}
	if err := needsLinux(cmd.name, c.args); err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return exitNeedsLinux
	}
	return runCmd(c)
}

// wantsJSON says whether --json was asked for: parsed already (from the
// environment, the config file, or the line before a bad flag), or on
// the line, where a bad flag stopped the parsing first.
func wantsJSON(fs *pflag.FlagSet, line []string) bool {
	if f := fs.Lookup("json"); f == nil {
		return false
	} else if f.Value.String() == "true" {
		return true
	}
	for _, a := range line {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--json"); ok && (v == "" || v == "=true" || v == "=1") {
			return true
		}
	}
	return false
}

// flagSet makes the command's flag set, with its flags registered (and
// --help), and returns its run function and where --help is parsed to.
// The help, the completions and the man page read the same set.
func (cmd *command) flagSet() (*pflag.FlagSet, func(*call) int, *bool) {
	fs := pflag.NewFlagSet(strings.TrimSpace("bulkmove "+cmd.name), pflag.ContinueOnError)
	fs.SortFlags = false     // listed as registered: the common first
	fs.SetOutput(io.Discard) // every message is this package's own
	fs.Usage = func() {}
	runCmd := cmd.setup(fs)
	return fs, runCmd, addHelp(fs)
}

// detachedValue catches a value written after a space to a flag whose
// value is optional (--compress zstd, --progress streams): the flag takes
// its default, and the word becomes an operand. Where that word is no
// path here, it was meant as the value, and the returned message says
// how to write it; "" otherwise.
func detachedValue(fs *pflag.FlagSet, line []string) string {
	for i := 0; i+1 < len(line); i++ {
		if line[i] == "--" {
			break
		}
		var f *pflag.Flag
		if name, ok := strings.CutPrefix(line[i], "--"); ok {
			f = fs.Lookup(name)
		} else if len(line[i]) == 2 && line[i][0] == '-' { // -z zstd
			f = fs.ShorthandLookup(line[i][1:])
		}
		if f == nil || !optionalValue(f) {
			continue
		}
		name := f.Name
		word := line[i+1]
		if strings.HasPrefix(word, "-") || strings.ContainsAny(word, "/.") {
			continue
		}
		if _, err := os.Lstat(word); err == nil {
			continue // a path: an operand indeed
		}
		return fmt.Sprintf("%s %s: --%s takes its value after '=', as --%s=%s (no path %s here)", line[i], word, name, name, word, word)
	}
	return ""
}

// addHelp registers --help on fs, with -h where -h is free (where it is
// rsync's --human-readable, -h alone asks for the help: see run).
func addHelp(fs *pflag.FlagSet) *bool {
	short := "h"
	if fs.ShorthandLookup("h") != nil {
		short = ""
	}
	var help bool
	section(fs, "common", func() {
		fs.BoolVarP(&help, "help", short, false, "print this help and exit (bulkmove help TOPIC: one section or command)")
	})
	if fs.Lookup("jobs") == nil {
		fs.SetAnnotation("help", annSection, []string{""}) // a command with no sections
	}
	return &help
}

// help writes the command's --help: its text, its flags (only one
// section's, if only is not ""), its tail.
func (cmd *command) help(w io.Writer, fs *pflag.FlagSet, only string) {
	if only == "" {
		fmt.Fprint(w, cmd.head)
	}
	if !cmd.hideFlags {
		printFlags(w, fs, only)
	}
	if only != "" {
		return
	}
	fmt.Fprint(w, cmd.tail)
	if cmd.name == "" {
		fmt.Fprint(w, "\nCommands (bulkmove COMMAND --help, or bulkmove help COMMAND, for each):\n")
		for _, c := range commands {
			if c.name != "" && !c.internal {
				for i, l := range wrap(c.summary, helpWidth-18) {
					if i == 0 {
						fmt.Fprintf(w, "  %-15s %s\n", c.name, l)
					} else {
						fmt.Fprintf(w, "%18s%s\n", "", l)
					}
				}
			}
		}
	}
}

// flagError is a flag parsing error in one line, naming the flag as it
// was typed.
func flagError(fs *pflag.FlagSet, err error) string {
	var unknown *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	switch {
	case errors.As(err, &unknown):
		name, group := unknown.GetSpecifiedName(), unknown.GetSpecifiedShortnames()
		if group == "" {
			if near := suggest(fs, name); len(near) > 0 {
				return fmt.Sprintf("unknown flag --%s; did you mean %s?", name, orList(near))
			}
			return "unknown flag --" + name
		}
		// -delete: a long flag given one dash, read as -d -e -l ...
		if long, _, _ := strings.Cut(group, "="); len(long) > 1 && fs.Lookup(long) != nil {
			return fmt.Sprintf("unknown flag -%s: a long flag takes two dashes, --%s", long, long)
		}
		if len(group) > 1 {
			return fmt.Sprintf("unknown flag -%s in -%s", name, group)
		}
		return "unknown flag -" + name
	case errors.As(err, &invalid):
		return fmt.Sprintf("invalid value %q for --%s: %v", invalid.GetValue(), invalid.GetFlag().Name, errors.Unwrap(invalid))
	}
	return err.Error()
}
