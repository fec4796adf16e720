package sshx

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// TestMain makes the tests hermetic: an empty HOME (no ~/.ssh), no agent,
// no system ssh_config or known_hosts, and no terminal.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "sshx-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("SSH_AUTH_SOCK")
	systemConfigFile = ""
	defaultGlobalKnownHosts = nil
	openTerminal = func() (terminal, error) { return nil, errors.New("no terminal in tests") }
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}
