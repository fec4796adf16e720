package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// TestShownArgs: printf and Errorf escape what they are given, keep their
// own format (newlines too), keep numbers and Go's quoting as they are,
// and show the errors of an errors.Join one per line.
func TestShownArgs(t *testing.T) {
	name := "a\x1b]0;pwned\x07b"
	for _, c := range []struct {
		format string
		args   []any
		want   string
	}{
		{"file %s\n", []any{name}, "file a\\x1b]0;pwned\\x07b\n"},
		{"%v", []any{&os.PathError{Op: "open", Path: "x\x1b[2J", Err: syscall.EACCES}}, `open x\x1b[2J: permission denied`},
		{"%q", []any{name}, `"a\x1b]0;pwned\ab"`},
		{"%d files, %.1f%% %s", []any{3, 12.5, "new\nline"}, `3 files, 12.5% new\x0aline`},
		{"%-6s|", []any{"\x07"}, `\x07     |`},
		{"%v", []any{errors.Join(errors.New("first \x1b[2J"), errors.New("second\nhalf"))}, "first \\x1b[2J\nsecond\\x0ahalf"},
		{"%v", []any{fmt.Errorf("wrapped: %w", errors.Join(errors.New("a"), errors.New("b\x07")))}, `wrapped: a\x0ab\x07`},
		{"%s", []any{[]byte("raw\x1b")}, `raw\x1b`},
		{"%v", []any{time.Second}, "1s"},
	} {
		var b bytes.Buffer
		printf(&b, c.format, c.args...)
		if b.String() != c.want {
			t.Errorf("printf(%q, %q) = %q, want %q", c.format, c.args, b.String(), c.want)
		}
	}
	var b bytes.Buffer
	Errorf(&b, "%s: %v", "dst", errors.New("x\x1b[2J"))
	if want := "bulkmove: dst: x\\x1b[2J\n"; b.String() != want {
		t.Errorf("Errorf = %q, want %q", b.String(), want)
	}
}

// TestLogFileSanitized: a line that reaches --log-file without printf (a
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
