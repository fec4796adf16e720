package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFileSanitized: a line that reaches --log-file without termsafe.Printf (a
// relayed one) still leaves no control character in the log.
func TestLogFileSanitized(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	l, err := openLog(path, "info")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(l, "bulkmove: bell \a, backspace \b, C1 \u009b, bad \xff\nsecond ")
	io.WriteString(l, "line \x7f\n")
	l.Close()
	b, _ := os.ReadFile(path)
	if err := termClean(string(b)); err != nil {
		t.Errorf("the log: %v", err)
	}
	for _, want := range []string{` bulkmove: bell \x07, backspace \x08, C1 \xc2\x9b, bad \xff` + "\n", " second line \\x7f\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the log lacks %q:\n%s", want, b)
		}
	}
}

// TestLogCommandRedacted: the log's command line keeps the words a
// shell needs to run it again, and no password: a URL's, sshpass's in
// -e's command, a password= word.
func TestLogCommandRedacted(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"--pushgateway", "https://ops:s3cret@gw:9091", "src", "dst"}, "bulkmove --pushgateway https://ops:REDACTED@gw:9091 src dst"},
		{[]string{"--pushgateway=http://u:p%40ss@gw/x"}, "bulkmove '--pushgateway=http://u:REDACTED@gw/x'"},
		{[]string{"-e", "sshpass -p s3cret ssh -p 2222", "src", "h:dst"}, "bulkmove -e 'sshpass -p REDACTED ssh -p 2222' src h:dst"},
		{[]string{"--rsh=sshpass -ps3cret ssh"}, "bulkmove '--rsh=sshpass -pREDACTED ssh'"},
		{[]string{"-e", "ssh -o Password=s3cret"}, "bulkmove -e 'ssh -o Password=REDACTED'"},
		{[]string{"--control-token", "/etc/bulkmove/token", "it's", "a b"}, `bulkmove --control-token /etc/bulkmove/token 'it'\''s' 'a b'`},
	} {
		if got := commandText(c.in); got != c.want {
			t.Errorf("%q: %s, want %s", c.in, got, c.want)
		}
		if strings.Contains(commandText(c.in), "s3cret") {
			t.Errorf("%q: the secret is in the log", c.in)
		}
	}
}
