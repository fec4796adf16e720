package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/internal/testbin"
)

// completionScript writes bulkmove completion SHELL, as a user installs it.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	out, err := exec.Command(testbin.Build(t), "completion", shell).Output()
	if err != nil {
		t.Fatalf("bulkmove completion %s: %v", shell, err)
	}
	p := filepath.Join(t.TempDir(), "bulkmove."+shell)
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompletionBash: what a user gets on TAB in bash, with the script
// sourced: commands in first place, flags (long and short) of the command
// typed, and the words a flag takes.
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := completionScript(t, "bash")
	complete := func(line string) []string {
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		sh := "source " + script + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _bulkmove; printf '%s\\n' \"${COMPREPLY[@]}\""
		cmd := exec.Command("bash", "-c", sh)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct {
		line      string
		want, not []string
	}{
		{"bulkmove --del", []string{"--delete", "--delete-excluded"}, []string{"--jobs"}},
		{"bulkmove --progress=st", []string{"streams"}, nil},
		{"bulkmove --transport t", []string{"tls", "tcp"}, []string{"ssh"}},
		{"bulkmove ver", []string{"verify", "verify-summary", "version"}, []string{"agent"}},
		{"bulkmove age", nil, []string{"agent"}}, // internal commands are not offered
		{"bulkmove verify --no-c", []string{"--no-content"}, nil},
		{"bulkmove serve --allow-o", []string{"--allow-owner"}, []string{"--delete"}},
		{"bulkmove -", []string{"-j", "-a", "-z", "-P", "--help"}, nil},
	} {
		got := complete(c.line)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %q: no %s", c.line, got, w)
			}
		}
		for _, w := range c.not {
			if slices.Contains(got, w) {
				t.Errorf("%q completes to %q, with %s", c.line, got, w)
			}
		}
	}
}

// TestCompletionFish: fish's own completer, given the script, offers the
// same; and its descriptions come from the help.
func TestCompletionFish(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("no fish (.ci/run installs it)")
	}
	script := completionScript(t, "fish")
	out, err := exec.Command("fish", "-c", "source "+script+
		"; complete -C 'bulkmove --del'; complete -C 'bulkmove --progress='; complete -C 'bulkmove ver'; complete -C 'bulkmove plan --pa'").CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, out)
	}
	for _, want := range []string{"--delete\tdelete from DEST what is not in SRC", "--delete-excluded\t", "--progress=streams\t",
		"verify\tcompare SRC with DEST", "version\t", "--parts\t"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("fish completes without %q:\n%s", want, out)
		}
	}
}

// TestCompletionZsh: the zsh script parses, and loaded as zsh loads a
// completion function (compinit, fpath) it defines _bulkmove for bulkmove.
func TestCompletionZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("no zsh (.ci/run installs it)")
	}
	script := completionScript(t, "zsh")
	dir := filepath.Dir(script)
	if err := os.Rename(script, filepath.Join(dir, "_bulkmove")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("zsh", "-f", "-c", "fpath=("+dir+" $fpath); autoload -U compinit; compinit -u -D; print -r -- ${_comps[bulkmove]}").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_bulkmove" {
		t.Fatalf("zsh: bulkmove completes with %q (%v)", out, err)
	}
	if out, err := exec.Command("zsh", "-n", filepath.Join(dir, "_bulkmove")).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
}
