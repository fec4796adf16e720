package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/engine"
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

Flags:
`

// runPlan is bulkmove plan: the part files of sharder.Plan.
func runPlan(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bulkmove plan", planUsage, "", stderr)
	parts := fs.Int("parts", 0, "number of parts (required)")
	out := fs.String("o", "", "output `DIR` for the part files and summary.txt (required)")
	nul := fs.Bool("0", false, "NUL-separated part files (for names with newlines; use -0 with --files-from too)")
	fs.BoolVar(nul, "from0", false, "same as -0")
	rules := new(filter.Rules)
	fs.Var(rules.Flag(filter.Exclude), "exclude", "leave out paths matching `PATTERN` (repeatable; docs/filters.md)")
	fs.Var(rules.Flag(filter.Include), "include", "keep paths matching `PATTERN` that a later rule would leave out (repeatable)")
	fs.Var(rules.FileFlag(filter.Exclude), "exclude-from", "read --exclude patterns from `FILE`")
	fs.Var(rules.FileFlag(filter.Include), "include-from", "read --include patterns from `FILE`")
	fs.Var(rules.Flag(filter.Filter), "filter", "add an rsync filter `RULE` (repeatable)")
	// Flags may come after SRC: bulkmove plan SRC --parts N -o DIR.
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 1 || *parts < 1 || *out == "" {
		termsafe.Errorf(stderr, "usage: bulkmove plan SRC --parts N -o DIR (N >= 1; see bulkmove plan -h)")
		return exitUsage
	}
	src := pos[0]
	real, fi, err := engine.ResolveSrc(src) // walked as the move walks it
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		termsafe.Errorf(stderr, "plan: source %s: %v", src, engine.Unwrap(err))
		return exitFatal
	}
	if inside, err := engine.InSource(real, *out); err == nil && inside {
		termsafe.Errorf(stderr, "plan: the output directory %s is inside the source %s", *out, src)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := sharder.Plan(ctx, real, sharder.PlanOptions{Dir: *out, Parts: *parts, NUL: *nul, Filter: rules,
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
		r.Entries, r.Stats.Files, units.Size(r.Bytes), *parts, *out, r.ImbalanceBytes, r.ImbalanceEntries, filepath.Join(*out, "summary.txt"))
	if r.BadNames > 0 {
		termsafe.Errorf(stderr, "plan: %d names hold a newline or end in a carriage return and were left out: plan again with -0", r.BadNames)
		return exitPartial
	}
	if r.Errors > 0 {
		return exitPartial
	}
	return exitOK
}
