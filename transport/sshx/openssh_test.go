package sshx

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenSSHOutputWhole: a short command's whole output comes back, as
// many times as it is run, though its ssh exits as soon as it has
// written it: the pipe is not closed under the reader when ssh is
// reaped (a stand-in for ssh runs the command here).
func TestOpenSSHOutputWhole(t *testing.T) {
	rsh := filepath.Join(t.TempDir(), "rsh")
	// The stand-in is called as `rsh HOST COMMAND`.
	if err := os.WriteFile(rsh, []byte("#!/bin/sh\nshift\nexec sh -c \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := NewOpenSSH(rsh, Target{Host: "h"}, Options{Batch: true, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := bytes.Repeat([]byte("x"), 300_000)
	for i := range 100 {
		l := s.Link()
		out, err := l.Output(testCtx(t), "head -c 300000 /dev/zero | tr '\\0' x")
		l.Close()
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("run %d: %d bytes of the 300000, %v", i, len(out), err)
		}
	}
}
