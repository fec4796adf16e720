package filter

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// AddFrom adds the rules read from rd, one a line, as rsync reads the file
// of --exclude-from (kind Exclude), --include-from (Include) or a merge
// file (Filter): a line ends at "\n", "\r" or "\r\n", or only at a NUL byte
// if from0 (rsync's --from0), and empty lines and lines starting with '#'
// or ';' are ignored. An error names the line. The rules read before an
// error stay added.
func (r *Rules) AddFrom(rd io.Reader, kind Kind, from0 bool) error {
	br := bufio.NewReader(rd)
	end := byte('\n')
	if from0 {
		end = 0
	}
	for n := 1; ; n++ {
		line, rerr := br.ReadString(end)
		if rerr != nil && rerr != io.EOF {
			return rerr
		}
		line = strings.TrimSuffix(line, string(end))
		parts := []string{line}
		if !from0 {
			parts = strings.Split(line, "\r")
		}
		for _, p := range parts {
			if p == "" || p[0] == '#' || p[0] == ';' {
				continue
			}
			if err := r.add(p, kind); err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
		}
		if rerr == io.EOF {
			return nil
		}
	}
}

// Value is a command-line flag's value: the standard library's flag.Value,
// with the Type that spf13/pflag's Value adds (a name for help).
type Value interface {
	String() string
	Set(string) error
	Type() string
}

// Flag returns a Value that adds each value to r as rsync's --exclude
// (kind Exclude), --include (Include) or --filter (Filter) does. Give each
// option its own Flag of the same Rules, and the rules keep the order of the
// command line, across options.
func (r *Rules) Flag(kind Kind) Value {
	return &flagValue{r: r, kind: kind}
}

// FileFlag returns a Value whose values name files to add with AddFrom,
// as rsync's --exclude-from (kind Exclude) and --include-from (Include) do;
// "-" is the standard input.
func (r *Rules) FileFlag(kind Kind) Value {
	return &flagValue{r: r, kind: kind, file: true}
}

type flagValue struct {
	r    *Rules
	kind Kind
	file bool
}

func (v *flagValue) String() string { return "" }

func (v *flagValue) Type() string {
	if v.file {
		return "FILE"
	}
	return "PATTERN"
}

func (v *flagValue) Set(s string) error {
	if !v.file {
		return v.r.add(s, v.kind)
	}
	if s == "-" {
		return v.r.AddFrom(os.Stdin, v.kind, false)
	}
	if s == "" {
		return errors.New("empty file name")
	}
	f, err := os.Open(s)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := v.r.AddFrom(f, v.kind, false); err != nil {
		return fmt.Errorf("%s: %w", s, err)
	}
	return nil
}
