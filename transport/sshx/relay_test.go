package sshx

import (
	"bytes"
	"testing"
)

// TestStderrRelayEscaped: what a remote command writes on stderr reaches
// the local terminal line by line, each line's control characters and
// invalid UTF-8 escaped (backslashes kept: a remote bulkmove escaped its
// own), however the bytes are split across writes; so does a server's
// banner.
func TestStderrRelayEscaped(t *testing.T) {
	var out bytes.Buffer
	s := &stderrSink{out: &out, prefix: "box2: "}
	for _, p := range []string{"retitle \x1b]0;pw", "ned\x07 clear \x1b[2J\r\n", "c1 \xc2\x9b lone \x9b bad \xff \\x1b kept\n", "no newline \x1b[1A"} {
		s.Write([]byte(p))
	}
	s.flush()
	want := "box2: retitle \\x1b]0;pwned\\x07 clear \\x1b[2J\n" +
		"box2: c1 \\xc2\\x9b lone \\x9b bad \\xff \\x1b kept\n" +
		"box2: no newline \\x1b[1A\n"
	if out.String() != want {
		t.Errorf("relayed\n%q\nwant\n%q", out.String(), want)
	}

	out.Reset()
	n := newNotes(&out)
	n.print("Welcome \x1b[31mred\x1b[0m\r\nline two \x07")
	if want := "Welcome \\x1b[31mred\\x1b[0m\nline two \\x07\n"; out.String() != want {
		t.Errorf("banner printed as %q, want %q", out.String(), want)
	}
}
