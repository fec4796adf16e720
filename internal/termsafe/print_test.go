package termsafe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestShownArgs: Printf and Errorf escape what they are given, keep their
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
		Printf(&b, c.format, c.args...)
		if b.String() != c.want {
			t.Errorf("Printf(%q, %q) = %q, want %q", c.format, c.args, b.String(), c.want)
		}
	}
	var b bytes.Buffer
	Errorf(&b, "%s: %v", "dst", errors.New("x\x1b[2J"))
	if want := "bulkmove: dst: x\\x1b[2J\n"; b.String() != want {
		t.Errorf("Errorf = %q, want %q", b.String(), want)
	}
}
