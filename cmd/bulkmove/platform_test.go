package main

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestNeedsLinux: where the receiver is unsupported, serve, the agent and
// a DEST on this host are refused, with the reason and the destination
// named, and a push to a remote DEST is not; on Linux nothing is.
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
		err := refuseReceiving(extract.ErrNeedsLinux, tc.command, tc.args)
		if (err != nil) != tc.refused || err != nil && !errors.Is(err, extract.ErrNeedsLinux) {
			t.Errorf("%q %q: %v, want refused %v", tc.command, tc.args, err, tc.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "receiving needs Linux") {
			t.Errorf("%q %q: %v: no reason", tc.command, tc.args, err)
		}
		if err != nil && tc.command == "" && !strings.Contains(err.Error(), "destination "+tc.args[1]) {
			t.Errorf("%q %q: %v: the destination is not named", tc.command, tc.args, err)
		}
		if got := needsLinux(tc.command, tc.args); (got != nil) != (tc.refused && runtime.GOOS != "linux") {
			t.Errorf("on %s: %q %q: %v", runtime.GOOS, tc.command, tc.args, got)
		}
	}
	if (extract.Supported() == nil) != (runtime.GOOS == "linux") {
		t.Errorf("extract.Supported() = %v on %s", extract.Supported(), runtime.GOOS)
	}
}
