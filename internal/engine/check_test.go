package engine

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/wire"
)

// The check flags map to the receiver's modes, pass on to a send-hub, and
// exclude each other: a usage error (exit 1) naming both.
func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		mode string
	}{
		{nil, wire.CheckQuick},
		{[]string{"--checksum"}, wire.CheckSum},
		{[]string{"-c"}, wire.CheckSum},
		{[]string{"--size-only"}, wire.CheckSize},
		{[]string{"--ignore-existing"}, wire.CheckExisting},
		{[]string{"--no-quick-check"}, wire.CheckNone},
	} {
		j := &job{}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		j.flags.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := j.receiveOptions().Check; got != c.mode {
			t.Errorf("%v: check %q, want %q", c.args, got, c.mode)
		}
		want := strings.Join(c.args, " ")
		if want == "-c" {
			want = "--checksum"
		}
		if got := strings.Join(j.flags.checkArgs(), " "); got != want {
			t.Errorf("%v: send-hub gets %v", c.args, j.flags.checkArgs())
		}
	}
	for _, args := range [][]string{
		{"--checksum", "--size-only"},
		{"-c", "--no-quick-check"},
		{"--ignore-existing", "--size-only"},
		{"--no-quick-check", "--ignore-existing"},
		{"--checksum", "--ignore-existing"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(args, "src", "dst"), strings.NewReader(""), &stdout, &stderr); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
		names := map[string]string{"-c": "--checksum"}
		for _, a := range args {
			if n, ok := names[a]; ok {
				a = n
			}
			if !strings.Contains(stderr.String(), a) || !strings.Contains(stderr.String(), "cannot be used together") {
				t.Errorf("%v: stderr %q does not name %s", args, stderr.String(), a)
			}
		}
	}
}
