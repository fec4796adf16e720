package termsafe

import (
	"fmt"
	"io"
	"strings"
)

// Everything bulkmove prints for people (stderr, --log-file, serve's log,
// the listings of --dry-run and verify on stdout) goes through Printf, which
// escapes every argument as Escape does: a file name (or an error,
// or a message from the other side, that carries one) never reaches a
// terminal or a log raw. The format string is bulkmove's own and is kept as
// it is, its newlines included. --json keeps the exact bytes (events.go).

// Printf is fmt.Fprintf with every argument escaped.
func Printf(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, format, shownArgs(a)...)
}

// Errorf prints one message on w (stderr or a log), prefixed with
// "bulkmove: ", its arguments escaped.
func Errorf(w io.Writer, format string, a ...any) {
	Printf(w, "bulkmove: "+format+"\n", a...)
}

func shownArgs(a []any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch v.(type) {
		case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr, float32, float64:
			out[i] = v // nothing to escape
		default:
			out[i] = shown{v}
		}
	}
	return out
}

// shown formats its value as fmt would, then escapes the text.
type shown struct{ v any }

func (s shown) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		// Go's quoting already escapes control characters and invalid
		// UTF-8; escaping its backslashes again would only obscure it.
		fmt.Fprintf(f, fmt.FormatString(f, verb), s.v)
		return
	}
	if err, ok := s.v.(error); ok && (verb == 'v' || verb == 's') && !f.Flag('+') && !f.Flag('#') {
		io.WriteString(f, shownError(err))
		return
	}
	io.WriteString(f, Escape(fmt.Sprintf(fmt.FormatString(f, verb), s.v)))
}

// shownError escapes err's message; the errors of an errors.Join stay on
// lines of their own, each escaped.
func shownError(err error) string {
	msg := err.Error()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		var parts []string
		for _, e := range j.Unwrap() {
			if e != nil {
				errs = append(errs, e)
				parts = append(parts, e.Error())
			}
		}
		if len(errs) > 1 && strings.Join(parts, "\n") == msg {
			for i, e := range errs {
				parts[i] = shownError(e)
			}
			return strings.Join(parts, "\n")
		}
	}
	return Escape(msg)
}
