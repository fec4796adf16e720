package main

import (
	"bytes"
	"strings"
	"testing"
)

// The check flags exclude each other: a usage error (exit 1) naming both.
func TestCheckFlagsExclusive(t *testing.T) {
	for _, args := range [][]string{
		{"--checksum", "--size-only"},
		{"-c", "--no-quick-check"},
		{"--ignore-existing", "--size-only"},
		{"--no-quick-check", "--ignore-existing"},
		{"--checksum", "--ignore-existing"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append(args, "src", "dst"), strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
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
