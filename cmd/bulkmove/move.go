package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/engine/event"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

const moveUsage = `bulkmove moves the contents of SRC into DEST over K parallel streams.

Usage: bulkmove [OPTION]... SRC DEST
       bulkmove [OPTION]... SRC [USER@]HOST:DEST        push over SSH
       bulkmove [OPTION]... [USER@]HOST:SRC DEST        pull over SSH
       bulkmove [OPTION]... HOST1:SRC HOST2:DEST        HOST1 to HOST2, from here
       bulkmove [OPTION]... SRC bulkmove://HOST:PORT/NAME/PATH  to a serve
       bulkmove COMMAND [OPTION]...                     (commands at the end)

SRC and SRC/ mean the same: the contents of SRC land in DEST, as with
rsync's "SRC/ DEST/" (rsync without the slash would make DEST/SRC). One SRC
is taken. DEST is made if missing; with --delete, what DEST has that SRC
has not goes. A single file is copied to DEST, or into DEST if a directory.

Examples:
  bulkmove -j 6 /data box2:/data           6 streams to box2 over SSH
  bulkmove -aP --delete /data box2:/data   rsync's habits; DEST a mirror
  bulkmove -n --delete /data box2:/data    what would move and go
  bulkmove --bwlimit 50M /data box2:/data  at most 50 MB/s in all
  bulkmove box2:/data /restore             pull
  bulkmove verify /data box2:/data         compare, write nothing

Preserved, always: content, permission bits, mtimes (nanoseconds),
symlinks, hard links (across the whole tree), empty directories, directory
mtimes, and numeric owner and group where the receiver runs as root
(unless --no-owner). Not without their flags: extended attributes (-X),
ACLs (-A), setuid/setgid bits (--keep-setid). Sockets, devices and FIFOs
are skipped with a warning (rsync's -a would make devices as root).
Files already at DEST with the same size and mtime are not sent again.
`

const exitCodesHelp = `
Exit codes:
  0    everything moved
  1    usage error (bad flags or arguments, SRC and DEST overlapping, ...)
  2    partial: some entries failed; each is listed on stderr with its cause
  3    fatal: the job could not be attempted or completed (SRC unreadable,
       DEST unwritable, destination full, a stream lost, --delete refused
       by its guard)
  4    this system cannot receive: DEST here, serve and the agent need Linux
  25   --max-delete stopped the deletions
  130  interrupted by a signal
`

// moveFlags registers the flags of bulkmove [flags] SRC DEST (a push, a
// pull or a local move), and returns its run.
func moveFlags(fs *pflag.FlagSet) func(*call) int {
	c := engine.DefaultConfig()
	registerMove(fs, &c)
	var version *bool
	section(fs, "common", func() { version = fs.Bool("version", false, "print the version and exit") })
	section(fs, "operations", func() {
		// Read before the flags are parsed (configDefaults); here for
		// --help, and so that the command line may give them.
		fs.String("config", "", "read defaults and profiles from `FILE` (default ~/.config/bulkmove/config; see docs/configuration.md)")
		fs.String("profile", "", "run the job `NAME` of the config file (its src, dst and flags)")
	})
	return func(x *call) int {
		if *version {
			printVersion(x.stdout, false)
			return exitOK
		}
		if err := checkConfig(x, &c); err != nil {
			if c.JSON {
				event.WriteUsageEnd(x.stdout, err, exitUsage)
			}
			return exitUsage
		}
		// runJob handles SIGINT and SIGTERM itself: the first lets what
		// is in flight land (--grace).
		j := engine.Job{Config: c, Src: x.args[0], Dst: x.args[1], Stdin: x.stdin, Stdout: x.stdout, Stderr: x.stderr, ExitCode: exitCode}
		return runJob(context.Background(), j, x.line, x.preset)
	}
}

// checkConfig checks what every command that moves or compares SRC and
// DEST needs: both, and options that make a job (Config.Check). It
// reports on stderr, and returns the error for the --json end event.
func checkConfig(x *call, c *engine.Config) error {
	var err error
	if c.CVSExclude {
		// rsync adds them last, wherever -C was given.
		err = c.Rules.AddCVSExclude()
	}
	if err == nil {
		err = c.Check()
	}
	if err == nil && len(x.args) != 2 {
		err = fmt.Errorf("want SRC and DEST, got %d arguments (see %s --help)", len(x.args), x.name)
	}
	if err != nil {
		termsafe.Errorf(x.stderr, "%v", err)
	}
	return err
}
