package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// bulkmove completion bash|zsh|fish writes a completion script made from
// the commands' flag sets: the same flags the help lists, so a flag added
// is completed without anyone editing a script.

const completionUsage = `usage: bulkmove completion bash|zsh|fish

Writes a shell completion script for bulkmove on stdout:

  source <(bulkmove completion bash)                   # bash, this shell
  bulkmove completion bash > /etc/bash_completion.d/bulkmove
  bulkmove completion zsh > "${fpath[1]}/_bulkmove"    # zsh
  bulkmove completion fish > ~/.config/fish/completions/bulkmove.fish

Commands, flags (long and short) and the words a flag takes (--progress=,
--transport ...) are completed; operands as files.
`

// completionFlags is bulkmove completion SHELL.
func completionFlags(fs *pflag.FlagSet) func(*call) int {
	return func(x *call) int {
		if len(x.args) != 1 {
			termsafe.Errorf(x.stderr, "completion: name the shell: bash, zsh or fish")
			return exitUsage
		}
		write := map[string]func(io.Writer, []completed){"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}[x.args[0]]
		if write == nil {
			termsafe.Errorf(x.stderr, "completion: no shell %q: bash, zsh or fish", x.args[0])
			return exitUsage
		}
		write(x.stdout, completedCommands())
		return exitOK
	}
}

// A completed command is one a user types, with its flags.
type completed struct {
	name, summary string // "" for the move
	flags         []*pflag.Flag
}

func completedCommands() []completed {
	var out []completed
	for i := range commands {
		c := &commands[i]
		if c.internal {
			continue
		}
		fs, _, _ := c.flagSet()
		var flags []*pflag.Flag
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				flags = append(flags, f)
			}
		})
		out = append(out, completed{c.name, c.summary, flags})
	}
	return out
}

// words are the values a flag takes, where they are a fixed set
// (--transport, --progress, --compress): the help's value name split at |,
// its lower-case words.
func words(f *pflag.Flag) []string {
	v := valueName(f)
	if !strings.Contains(v, "|") {
		return nil
	}
	var w []string
	for _, s := range strings.Split(v, "|") {
		if s == strings.ToLower(s) && !strings.ContainsAny(s, "[]") {
			w = append(w, s)
		} else if word, _, ok := strings.Cut(s, "["); ok && word == strings.ToLower(word) {
			w = append(w, word) // zstd[:LEVEL]: zstd
		}
	}
	return w
}

// takesValue says whether a flag needs a value after it (not a bool, a
// count, or one whose value is optional).
func takesValue(f *pflag.Flag) bool { return valueName(f) != "" && f.NoOptDefVal == "" }

// optionalValue says whether a flag takes a value only after an =
// (--progress, --compress): pflag gives booleans a NoOptDefVal too.
func optionalValue(f *pflag.Flag) bool { return valueName(f) != "" && f.NoOptDefVal != "" }

// shortSummary is the first clause of a flag's usage, for the one-line
// descriptions zsh and fish show.
func shortSummary(f *pflag.Flag) string {
	u := usageOf(f)
	if i := strings.IndexAny(u, ":;("); i > 20 {
		u = u[:i]
	}
	u = strings.TrimSpace(u)
	if len(u) > 70 {
		u = u[:67] + "..."
	}
	return u
}

func bashCompletion(w io.Writer, cmds []completed) {
	fmt.Fprintln(w, "# bash completion for bulkmove (bulkmove completion bash)")
	fmt.Fprintln(w, "_bulkmove() {")
	fmt.Fprintln(w, `	local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"`)
	var names []string
	for _, c := range cmds {
		if c.name != "" {
			names = append(names, c.name)
		}
	}
	fmt.Fprintf(w, "\tlocal cmd= commands=%q\n", strings.Join(names, " "))
	fmt.Fprintln(w, `	if [ "$COMP_CWORD" -gt 1 ]; then case " $commands " in *" ${COMP_WORDS[1]} "*) cmd=${COMP_WORDS[1]} ;; esac; fi`)
	fmt.Fprintln(w, "\tlocal opts= valued= ")
	fmt.Fprintln(w, "\tcase $cmd in")
	for _, c := range cmds {
		label := c.name
		if label == "" {
			label = "''"
		}
		var opts, valued []string
		for _, f := range c.flags {
			long := "--" + f.Name
			opts = append(opts, long)
			if optionalValue(f) || words(f) != nil {
				opts = append(opts, long+"=")
			}
			if f.Shorthand != "" {
				opts = append(opts, "-"+f.Shorthand)
			}
			if takesValue(f) {
				valued = append(valued, long)
				if f.Shorthand != "" {
					valued = append(valued, "-"+f.Shorthand)
				}
			}
		}
		fmt.Fprintf(w, "\t%s) opts=%q; valued=%q ;;\n", label, strings.Join(opts, " "), " "+strings.Join(valued, " ")+" ")
	}
	fmt.Fprintln(w, "\tesac")
	// Words for a flag's value: --progress=st<TAB>, --transport t<TAB>.
	fmt.Fprintln(w, "\tlocal flag= val=")
	fmt.Fprintln(w, `	if [[ $cur == --*=* ]]; then flag=${cur%%=*}; val=${cur#*=}; elif [[ " $valued " == *" $prev "* ]]; then flag=$prev; val=$cur; fi`)
	fmt.Fprintln(w, "\tif [ -n \"$flag\" ]; then")
	fmt.Fprintln(w, "\t\tlocal vals=")
	fmt.Fprintln(w, "\t\tcase $flag in")
	seen := map[string]bool{}
	for _, c := range cmds {
		for _, f := range c.flags {
			if ws := words(f); ws != nil && !seen[f.Name] {
				seen[f.Name] = true
				fmt.Fprintf(w, "\t\t--%s) vals=%q ;;\n", f.Name, strings.Join(ws, " "))
			}
		}
	}
	fmt.Fprintln(w, "\t\tesac")
	fmt.Fprintln(w, `		if [ -n "$vals" ]; then COMPREPLY=($(compgen -W "$vals" -- "$val")); return; fi`)
	fmt.Fprintln(w, `		COMPREPLY=($(compgen -f -- "$val")); return`)
	fmt.Fprintln(w, "\tfi")
	fmt.Fprintln(w, `	if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null; return; fi`)
	fmt.Fprintln(w, `	COMPREPLY=($(compgen -f -- "$cur"))`)
	fmt.Fprintln(w, `	if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY+=($(compgen -W "$commands" -- "$cur")); fi`)
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w, "complete -o filenames -F _bulkmove bulkmove")
}

// zshQuote escapes s for a zsh _arguments spec inside single quotes.
func zshQuote(s string) string {
	r := strings.NewReplacer("'", `'\''`, "[", `\[`, "]", `\]`, ":", `\:`)
	return r.Replace(s)
}

func zshCompletion(w io.Writer, cmds []completed) {
	fmt.Fprintln(w, "#compdef bulkmove")
	fmt.Fprintln(w, "# zsh completion for bulkmove (bulkmove completion zsh)")
	fmt.Fprintln(w, "_bulkmove() {")
	fmt.Fprintln(w, "\tlocal -a commands")
	fmt.Fprint(w, "\tcommands=(")
	for _, c := range cmds {
		if c.name != "" {
			fmt.Fprintf(w, " '%s:%s'", c.name, zshQuote(c.summary))
		}
	}
	fmt.Fprintln(w, " )")
	fmt.Fprintln(w, "\tcase ${words[2]} in")
	for _, c := range cmds {
		label, shift := c.name, "shift words; (( CURRENT-- )); "
		if label == "" {
			label, shift = "*", ""
		}
		fmt.Fprintf(w, "\t%s) %s_arguments -s -S", label, shift)
		for _, f := range c.flags {
			desc := zshQuote(shortSummary(f))
			value := ""
			switch ws := words(f); {
			case takesValue(f) && ws != nil:
				value = fmt.Sprintf(":%s:(%s)", zshQuote(valueName(f)), strings.Join(ws, " "))
			case takesValue(f):
				value = fmt.Sprintf(":%s:_files", zshQuote(valueName(f)))
			case optionalValue(f) && ws != nil:
				value = fmt.Sprintf("::%s:(%s)", zshQuote(valueName(f)), strings.Join(ws, " "))
			}
			eq := ""
			if takesValue(f) {
				eq = "="
			} else if optionalValue(f) {
				eq = "=-"
			}
			rep := ""
			if f.Value.Type() == "count" || strings.Contains(f.Usage, "repeatable") {
				rep = "*"
			}
			if f.Shorthand != "" {
				fmt.Fprintf(w, " \\\n\t\t'%s(-%s --%s)'{-%s,--%s%s}'[%s]%s'", rep, f.Shorthand, f.Name, f.Shorthand, f.Name, eq, desc, value)
			} else {
				fmt.Fprintf(w, " \\\n\t\t'%s--%s%s[%s]%s'", rep, f.Name, eq, desc, value)
			}
		}
		if c.name == "" {
			fmt.Fprint(w, " \\\n\t\t'1: :{_describe command commands; _files}' \\\n\t\t'*:file:_files'")
		} else {
			fmt.Fprint(w, " \\\n\t\t'*:file:_files'")
		}
		fmt.Fprintln(w, " ;;")
	}
	fmt.Fprintln(w, "\tesac")
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w, `if [ "$funcstack[1]" = "_bulkmove" ]; then _bulkmove "$@"; else compdef _bulkmove bulkmove; fi`)
}

// fishQuote quotes s for fish, in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func fishCompletion(w io.Writer, cmds []completed) {
	fmt.Fprintln(w, "# fish completion for bulkmove (bulkmove completion fish)")
	var names []string
	for _, c := range cmds {
		if c.name != "" {
			names = append(names, c.name)
		}
	}
	all := strings.Join(names, " ")
	fmt.Fprintln(w, "complete -c bulkmove -f -a '(__fish_complete_path (commandline -ct))'")
	for _, c := range cmds {
		cond := "not __fish_seen_subcommand_from " + all
		if c.name != "" {
			fmt.Fprintf(w, "complete -c bulkmove -n '__fish_use_subcommand' -a %s -d %s\n", c.name, fishQuote(c.summary))
			cond = "__fish_seen_subcommand_from " + c.name
		}
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c bulkmove -n %s -l %s", fishQuote(cond), f.Name)
			if f.Shorthand != "" {
				line += " -s " + f.Shorthand
			}
			if takesValue(f) {
				line += " -r"
			}
			if ws := words(f); ws != nil {
				line += " -a " + fishQuote(strings.Join(ws, " "))
				if !takesValue(f) {
					line += " -f"
				}
			}
			fmt.Fprintln(w, line+" -d "+fishQuote(shortSummary(f)))
		}
	}
}
