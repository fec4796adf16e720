package main

import (
	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
)

const verifyUsage = `usage: bulkmove verify [flags] SRC DEST
       bulkmove verify [flags] SRC [user@]host:DEST
       bulkmove verify [flags] [user@]host1:SRC [user@]host2:DEST

Compares SRC with DEST, as a transfer of SRC to DEST would leave it: every
entry's type, size, mtime, permission bits, owner (as root), symlink
target and hard links, and every file's content (XXH3-128, hashed on both
hosts at once, K streams in parallel); then what DEST has that SRC does
not. Writes nothing. With two remote hosts it runs on host1, started and
followed from here as a remote-to-remote move is (docs/remote-to-remote.md). Each difference is a line on stdout:

  differ PATH: WHAT      (e.g. "size: source 10, destination 12")
  missing PATH
  extra PATH

Exit status: 0 if the trees are the same, 2 if any difference, 1 for a
usage error, 3 if the comparison could not be done.
`

// verifyFlags registers the flags of bulkmove verify [flags] SRC DEST:
// those that say where and how to compare (registerCompare's), none of a
// move's own.
func verifyFlags(fs *pflag.FlagSet) func(*call) int {
	c := engine.DefaultConfig()
	registerCompare(fs, &c)
	noContent := fs.Bool("no-content", false, "compare metadata only, not file content")
	return func(x *call) int {
		if checkConfig(x, &c) != nil {
			return exitUsage
		}
		ctx, stop := signalContext()
		defer stop()
		j := engine.Job{Config: c, Src: x.args[0], Dst: x.args[1], Stdout: x.stdout, Stderr: x.stderr, ExitCode: exitCode}
		return exitCode(j.Verify(ctx, !*noContent))
	}
}
