package main

import (
	"errors"
	"runtime"
	"testing"

	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestNeedsLinux: on Linux nothing is refused; elsewhere serve, the agent
// and a DEST on this host are, and a push to a remote DEST is not.
func TestNeedsLinux(t *testing.T) {
	for _, tc := range []struct {
		command string
		args    []string
		refused bool
	}{
		{"serve", []string{"--root", "/srv"}, true},
		{wire.CmdAgent, []string{"/dst"}, true},
		{"", []string{"src", "dst"}, true},
		{"", []string{"src", "/abs/dst"}, true},
		{"verify", []string{"src", "dst"}, true},
		{"", []string{"src", "host:dst"}, false},
		{"", []string{"src", "user@host:/dst"}, false},
		{"", []string{"src", "bulkmove://host:7000/root/dst"}, false},
		{"", []string{"src"}, false},
		{"version", nil, false},
		{"plan", []string{"src", "4"}, false},
	} {
		err := needsLinux(tc.command, tc.args)
		want := tc.refused && runtime.GOOS != "linux"
		if (err != nil) != want || err != nil && !errors.Is(err, extract.ErrNeedsLinux) {
			t.Errorf("%q %q: %v, want refused %v", tc.command, tc.args, err, want)
		}
	}
	if (extract.Supported() == nil) != (runtime.GOOS == "linux") {
		t.Errorf("extract.Supported() = %v on %s", extract.Supported(), runtime.GOOS)
	}
}
