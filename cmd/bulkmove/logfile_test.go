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
