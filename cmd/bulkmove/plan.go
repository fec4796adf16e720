package main

import (
	"errors"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/engine/paths"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/sharder"
)

const planUsage = `usage: bulkmove plan [flags] SRC --parts N -o DIR

Walks SRC once and writes N part files, DIR/part-0001 ... DIR/part-N, of
balanced bytes and entry counts: together they list every entry of SRC
(files, directories, symlinks, hard links) exactly once, one path relative
to SRC a line (NUL-separated with -0), for "bulkmove --files-from PART SRC
DEST" on N hosts. DIR/summary.txt has the counts, bytes, a size histogram
and the largest files and directories. See docs/scale-out.md.
`

// planOptions are bulkmove plan's flags.
type planOptions struct {
	parts int
	out   string
	nul   bool
	rules filter.Rules
}

// planFlags registers bulkmove plan's flags and returns its run.
func planFlags(fs *pflag.FlagSet) func(*call) int {
	o := new(planOptions)
	fs.IntVar(&o.parts, "parts", 0, "number of parts (required)")
	fs.StringVarP(&o.out, "output", "o", "", "output `DIR` for the part files and summary.txt (required)")
	fs.BoolVarP(&o.nul, "from0", "0", false, "NUL-separated part files (for names with newlines; use -0 with --files-from too)")
	fs.Var(o.rules.Flag(filter.Exclude), "exclude", "leave out paths matching `PATTERN` (repeatable; docs/filters.md)")
	fs.Var(o.rules.Flag(filter.Include), "include", "keep paths matching `PATTERN` that a later rule would leave out (repeatable)")
	fs.Var(o.rules.FileFlag(filter.Exclude), "exclude-from", "read --exclude patterns from `FILE`")
	fs.Var(o.rules.FileFlag(filter.Include), "include-from", "read --include patterns from `FILE`")
	fs.Var(o.rules.Flag(filter.Filter), "filter", "add an rsync filter `RULE` (repeatable)")
	return func(x *call) int { return runPlan(x, o) }
}

// runPlan is bulkmove plan: the part files of sharder.Plan.
func runPlan(x *call, o *planOptions) int {
	stderr := x.stderr
	if len(x.args) != 1 || o.parts < 1 || o.out == "" {
		termsafe.Errorf(stderr, "usage: bulkmove plan SRC --parts N -o DIR (N >= 1; see bulkmove plan --help)")
		return exitUsage
	}
	src := x.args[0]
	real, fi, err := paths.ResolveSrc(src) // walked as the move walks it
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		termsafe.Errorf(stderr, "plan: source %s: %v", src, paths.Unwrap(err))
		return exitFatal
	}
	if inside, err := paths.InSource(real, o.out); err == nil && inside {
		termsafe.Errorf(stderr, "plan: the output directory %s is inside the source %s", o.out, src)
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	r, err := sharder.Plan(ctx, real, sharder.PlanOptions{Dir: o.out, Parts: o.parts, NUL: o.nul, Filter: &o.rules,
		OnError: func(_ string, err error) { termsafe.Errorf(stderr, "%v", err) },
		OnWarn: func(path, msg string) {
			termsafe.Errorf(stderr, "warning: %s: %s", filepath.Join(real, filepath.FromSlash(path)), msg)
		},
		OnBadName: func(path string) {
			termsafe.Errorf(stderr, "plan: %q: a name with a newline (or a trailing carriage return) needs -0", path)
		},
	})
	if err != nil {
		termsafe.Errorf(stderr, "%v", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
		return exitFatal
	}
	termsafe.Errorf(stderr, "plan: %d entries (%d files, %s) in %d parts in %s: the largest part is %+.1f%% of the mean in bytes, %+.1f%% in entries; see %s",
		r.Entries, r.Stats.Files, units.Size(r.Bytes), o.parts, o.out, r.ImbalanceBytes, r.ImbalanceEntries, filepath.Join(o.out, "summary.txt"))
	if r.BadNames > 0 {
		termsafe.Errorf(stderr, "plan: %d names hold a newline or end in a carriage return and were left out: plan again with -0", r.BadNames)
		return exitPartial
	}
	if r.Errors > 0 {
		return exitPartial
	}
	return exitOK
}
