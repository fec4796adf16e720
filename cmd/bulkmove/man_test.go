package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var updateMan = flag.Bool("update-man", false, "rewrite docs/bulkmove.1 and docs/flags.md (make man)")

const manFile, flagsFile = "../../docs/bulkmove.1", "../../docs/flags.md"

// TestFlagsDoc: docs/flags.md is what the flag definitions make now.
func TestFlagsDoc(t *testing.T) {
	var b bytes.Buffer
	flagsMarkdown(&b)
	if *updateMan {
		if err := os.WriteFile(flagsFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if have, err := os.ReadFile(flagsFile); err != nil || !bytes.Equal(have, b.Bytes()) {
		t.Fatalf("docs/flags.md is stale (%v): run make man and commit it", err)
	}
	for _, want := range []string{"| `-j, --jobs=N\\|auto` |", "## Deletion", "(default `16MiB`)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("docs/flags.md without %s", want)
		}
	}
}

// TestManPage: docs/bulkmove.1 is what the flag definitions make now (make
// man rewrites it), and man renders it at 80 columns without a warning,
// listing every flag of the move once.
func TestManPage(t *testing.T) {
	var b bytes.Buffer
	manPage(&b)
	if *updateMan {
		if err := os.WriteFile(manFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(manFile)
	if err != nil {
		t.Fatalf("%v (make man writes it)", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatalf("docs/bulkmove.1 is stale: run make man and commit it")
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("no man (.ci/run installs man-db)")
	}
	cmd := exec.Command("man", "--warnings", "-l", manFile)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat", "LC_ALL=C.UTF-8")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l docs/bulkmove.1: %v\n%s", err, stderr.String())
	}
	text := string(out)
	fs, _, _ := commands[0].flagSet()
	for _, name := range []string{"--jobs", "--delete", "--bwlimit", "--exclude", "--ssh-config", "--compress"} {
		if fs.Lookup(strings.TrimPrefix(name, "--")) == nil {
			t.Fatalf("no flag %s", name)
		}
		if n := strings.Count(text, name+"="); name != "--delete" && n != 1 && !strings.Contains(text, name+"[=") {
			t.Errorf("man page lists %s= %d times", name, n)
		}
	}
	for _, want := range []string{"SYNOPSIS", "EXIT STATUS", "BULKMOVE_", "-a, --archive", "Which paths are moved"} {
		if !strings.Contains(text, want) {
			t.Errorf("man page without %q", want)
		}
	}
	for i, l := range strings.Split(text, "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("line %d wider than 80 columns: %q", i+1, l)
		}
	}
}
