package engine

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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

// termClean says where text holds what a terminal would act on.
func termClean(text string) error {
	for i, r := range text {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(text[i:], "\ufffd"):
			return fmt.Errorf("byte %#x at %d is not UTF-8: %q", text[i], i, around(text, i))
		case r == '\n':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Errorf("control character %U at %d: %q", r, i, around(text, i))
		}
	}
	return nil
}

func around(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}
