package main

import (
	"context"
	"flag"
	"io"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

const moveUsage = `usage: bulkmove [flags] SRC DEST
       bulkmove [flags] SRC [user@]host:DEST     (push over K SSH connections)
       bulkmove [flags] [user@]host:SRC DEST     (pull)
       bulkmove plan SRC --parts N -o DIR [-0]   (part files for --files-from)
       bulkmove agent [--metrics-addr ADDR] ROOT
       bulkmove version [--proto]

Moves the contents of SRC into DEST over K parallel streams, like
"rsync -a SRC/ DEST/": DEST is created if missing, and SRC/a/b lands as
DEST/a/b. If SRC is a single file, it is copied to DEST (or into DEST, if
DEST is a directory). A SRC or DEST that is a symlink is followed;
symlinks inside SRC stay symlinks; SRC and DEST that Overlap are refused.
Files already at DEST with the same size and mtime are not sent again.

Preserved: content, permission bits, mtimes (nanoseconds), symlinks, hard
links (across the whole tree), empty directories, directory mtimes, and
numeric owner and group when run as root (unless --no-owner). Sockets,
devices and FIFOs are skipped with a warning; setuid/setgid bits and file
capabilities are dropped unless --keep-setid.

Flags:
`

const exitCodesHelp = `
Exit codes:
  0    everything moved
  1    usage error (bad flags or arguments, SRC and DEST overlapping, ...)
  2    partial: some entries failed; each is listed on stderr with its cause
  3    fatal: the job could not be attempted or completed (SRC unreadable,
       DEST unwritable, destination full, a stream lost, --delete refused
       by its guard)
  25   --max-delete stopped the deletions
  130  interrupted by a signal
`

// runMove is bulkmove [flags] SRC DEST: a push, a pull or a local move.
func runMove(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := engine.DefaultConfig()
	fs := newFlagSet("bulkmove", moveUsage, exitCodesHelp, stderr)
	registerMove(fs, &c)
	version := fs.Bool("version", false, "print the version and exit")
	fs.String("config", "", "read defaults and profiles from `FILE` (default ~/.config/bulkmove/config; see docs/configuration.md)")
	fs.String("profile", "", "run the job `NAME` of the config file (its src, dst and flags)")
	cfgFlags, cfgSrc, cfgDst, err := configArgs(args)
	if err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return exitUsage
	}
	if err := fs.Parse(cfgFlags); err != nil {
		termsafe.Errorf(stderr, "config: %v", err)
		return exitUsage
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 && cfgSrc != "" && cfgDst != "" {
		fs.Parse([]string{"--", cfgSrc, cfgDst})
	}
	if *version {
		return runVersion(nil, stdout, stderr)
	}
	if !checkConfig(fs, &c, "bulkmove", stderr) {
		return exitUsage
	}
	// runJob handles SIGINT and SIGTERM itself: the first lets what is in
	// flight land (--grace).
	j := engine.Job{Config: c, Src: fs.Arg(0), Dst: fs.Arg(1), Stdin: stdin, Stdout: stdout, Stderr: stderr, ExitCode: exitCode}
	return runJob(context.Background(), j, args)
}

// checkConfig checks what every command that moves or compares SRC and
// DEST needs: both, and options that make a job (Config.Check). It
// reports on stderr.
func checkConfig(fs *flag.FlagSet, c *engine.Config, cmd string, stderr io.Writer) bool {
	if err := c.Check(); err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return false
	}
	if fs.NArg() != 2 {
		termsafe.Errorf(stderr, "want SRC and DEST, got %d arguments (see %s -h)", fs.NArg(), cmd)
		return false
	}
	return true
}
