package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMakeInstall: make install puts the binary, the man page and the
// three shells' completions under DESTDIR and PREFIX, and the installed
// binary runs.
func TestMakeInstall(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds bulkmove")
	}
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is missing")
		}
		t.Skip("make is missing")
	}
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "bin", "bulkmove")
	cmd := exec.Command("make", "-C", "../..", "install", "DESTDIR="+dest, "PREFIX=/opt/bm", "BIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	man, err := os.ReadFile("../../docs/bulkmove.1")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"bin/bulkmove":                                  "",
		"share/man/man1/bulkmove.1":                     string(man),
		"share/bash-completion/completions/bulkmove":    "complete ",
		"share/zsh/site-functions/_bulkmove":            "#compdef bulkmove",
		"share/fish/vendor_completions.d/bulkmove.fish": "complete -c bulkmove",
	} {
		b, err := os.ReadFile(filepath.Join(dest, "opt/bm", path))
		if err != nil {
			t.Errorf("make install: %v", err)
			continue
		}
		if !bytes.Contains(b, []byte(want)) || len(b) == 0 {
			t.Errorf("make install: %s has no %q", path, want)
		}
	}
	out, err := exec.Command(filepath.Join(dest, "opt/bm/bin/bulkmove"), "version").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("bulkmove ")) {
		t.Errorf("the installed bulkmove version: %q, %v", out, err)
	}
}
