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

// FFlag returns the Value of rsync's -F: the first time it is set (to
// anything) it adds "dir-merge /.rsync-filter", the per-directory
// .rsync-filter files of the tree and of the directories above it; the
// second time "exclude .rsync-filter", which leaves the files themselves
// out (-FF); later times nothing. It takes no argument (IsBoolFlag).
func (r *Rules) FFlag() Value {
	return &fFlag{r: r}
}

type fFlag struct {
	r *Rules
	n int
}

func (v *fFlag) String() string   { return "" }
func (v *fFlag) Type() string     { return "" }
func (v *fFlag) IsBoolFlag() bool { return true }

func (v *fFlag) Set(string) error {
	v.n++
	switch v.n {
	case 1:
		return v.r.Add("dir-merge /.rsync-filter")
	case 2:
		return v.r.Add("exclude .rsync-filter")
	}
	return nil
}

// AddCVSExclude adds what rsync's -C (--cvs-exclude) adds, after the rules
// given so far, wherever -C was on the command line: ":C", the
// .cvsignore file of each directory (for its names only), then "-C", the
// default CVS ignores, $HOME/.cvsignore and $CVSIGNORE. Call it once the
// other rules are added.
func (r *Rules) AddCVSExclude() error {
	if err := r.Add(":C"); err != nil {
		return err
	}
	return r.Add("-C")
}
