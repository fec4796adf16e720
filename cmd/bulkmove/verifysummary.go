package main

import (
	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
)

const verifySummaryUsage = `usage: bulkmove verify-summary REPORT...

Merges the reports of ` + "`bulkmove verify --shard i/N --json`" + ` (one a shard, run
on as many hosts) into one: every difference, sorted by path, as verify
prints them

  differ PATH: WHAT
  missing PATH
  extra PATH

then a line of totals. It checks that the reports cover the tree: one
report for each shard 0..N-1 of one N (or a single report without
--shard), each complete (it ends with verify's summary event).

Exit status: 0 if every shard was verified and none differs, 2 if any
difference, 3 if a report is missing, repeated, incomplete or failed, 1 for
a usage error.
`

// verifySummaryFlags is bulkmove verify-summary REPORT...: no flags.
func verifySummaryFlags(fs *pflag.FlagSet) func(*call) int {
	return func(x *call) int {
		if len(x.args) == 0 {
			fs.Usage()
			return exitUsage
		}
		return exitCode(engine.VerifySummary(x.args, x.stdout, x.stderr))
	}
}
