package engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/wire"
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

type moveFlags struct {
	jobs             int
	batchSize        byteSize
	batchFiles       int
	rules            *filter.Rules // --exclude, --include, --exclude-from, --include-from, --filter
	dryRun           bool
	delete           bool
	deleteExcluded   bool
	noDeleteGuard    bool
	maxDelete        countFlag // --max-delete
	journal          string
	retries          int
	oneFS            bool
	logFile          string
	logLevel         string
	noVerifyTransfer bool
	compress         compressFlag
	reconnectTimeout time.Duration
	stallTimeout     time.Duration
	grace            time.Duration
	serve            serveFlags
	transport        string
	dataPorts        string
	dataAddr         string
	requireSpace     bool
	ioConc           ioConcFlag // --io-concurrency: see ioconc.go
	verbose          bool
	version          bool
	fsync            bool
	keepSetid        bool
	noOwner          bool
	noCheck          bool
	checksum         bool // --checksum, --size-only, --ignore-existing: see check.go
	sizeOnly         bool
	ignoreExisting   bool
	viaAgent         bool
	json             bool
	progress         string
	obs              obsFlags
	gentle           gentleFlags // --bwlimit, --max-read-rate, --io-nice, --nice: see gentle.go
	ssh              sshFlags
	scale            scaleFlags
	faithful         faithfulFlags // -X, -A, --sparse: see faithful.go
	auto             autoFlags     // -j auto, --max-streams: see autoj.go
	split            splitFlag     // --split-size: see split.go
}

func (f *moveFlags) register(fs *flag.FlagSet) {
	f.registerJobs(fs)
	f.batchSize = byteSize(sharder.DefaultBatchBytes)
	fs.Var(&f.batchSize, "batch-size", "close a batch at this cost: bytes plus a per-file overhead (e.g. 64MiB)")
	fs.IntVar(&f.batchFiles, "batch-files", sharder.DefaultBatchFiles, "close a batch at this many files")
	// The filter flags share one list of rules, in command-line order.
	f.rules = new(filter.Rules)
	fs.Var(f.rules.Flag(filter.Exclude), "exclude", "leave out paths matching `PATTERN`, an rsync pattern (repeatable; see docs/filters.md)")
	fs.Var(f.rules.Flag(filter.Include), "include", "keep paths matching `PATTERN` that a later rule would leave out (repeatable)")
	fs.Var(f.rules.FileFlag(filter.Exclude), "exclude-from", "read --exclude patterns from `FILE`, one a line; - is stdin (repeatable)")
	fs.Var(f.rules.FileFlag(filter.Include), "include-from", "read --include patterns from `FILE`, one a line; - is stdin (repeatable)")
	fs.Var(f.rules.Flag(filter.Filter), "filter", "add an rsync filter `RULE`: '- PAT', '+ PAT', '!', ... (repeatable)")
	fs.BoolVar(&f.delete, "delete", false, "delete from DEST what is not in SRC (after the transfer, and only if nothing failed; excluded paths are kept)")
	fs.BoolVar(&f.deleteExcluded, "delete-excluded", false, "with --delete, also delete excluded paths at DEST (implies --delete)")
	fs.BoolVar(&f.noDeleteGuard, "no-delete-guard", false, "with --delete, delete even when SRC selected nothing or more than half of DEST's entries (at least 1000) would go")
	fs.Var(&f.maxDelete, "max-delete", "with --delete, delete at most `N` entries; past them the job says how many more it left and exits 25")
	f.compress.Mode = send.CompressAuto
	fs.Var(&f.compress, "compress", "compress the data of remote streams: auto (each stream compresses while its link is slower than compression and the data compresses), zstd[:LEVEL] (always; LEVEL 1-22), none")
	fs.BoolVar(&f.noVerifyTransfer, "no-verify-transfer", false, "do not check each file's XXH3-128 end to end (the receiver then installs what arrives)")
	fs.StringVar(&f.logFile, "log-file", "", "append what bulkmove says on stderr to `FILE`, timestamped")
	fs.StringVar(&f.logLevel, "log-level", "info", "--log-file detail: info (what stderr shows) or debug (also the -v phases)")
	fs.BoolVar(&f.oneFS, "x", false, "do not cross filesystem boundaries: a mount point under SRC is moved as an empty directory")
	fs.BoolVar(&f.oneFS, "one-file-system", false, "do not cross filesystem boundaries (as -x)")
	fs.IntVar(&f.retries, "retries", 5, "times a batch may be on a stream that fails before the job gives up")
	fs.DurationVar(&f.reconnectTimeout, "reconnect-timeout", 5*time.Minute, "how long a lost stream tries to reconnect (exponential backoff) before the job goes on without it; 0: never")
	fs.DurationVar(&f.stallTimeout, "stall-timeout", 60*time.Second, "a stream that moves no byte for this long with work in flight is closed and reconnected")
	fs.Var(&f.ioConc, "io-concurrency", "file operations at once on each side, independent of -j: `N`, or auto (from the filesystems' measured latency: 1 on a local disk, up to 64 on NFS)")
	fs.BoolVar(&f.requireSpace, "require-space", false, "refuse to go on once the walk has found more to move than DEST has free (without it: a warning)")
	fs.StringVar(&f.transport, "transport", "ssh", "how the streams travel to a remote host: ssh (K SSH connections), tls (SSH starts the agent, the streams go over TLS 1.3 straight to it), tcp (the same, unencrypted), auto (tls, else ssh)")
	fs.StringVar(&f.dataPorts, "data-ports", "", "port `range` the agent listens on for --transport tls/tcp, e.g. 50000-50100 (default: any)")
	fs.StringVar(&f.dataAddr, "data-addr", "", "the remote host's `address` the agent listens on for --transport tls/tcp, and the streams go to (default: the address SSH reached it on; 0.0.0.0 or :: for all, the streams to the host's name)")
	f.serve.register(fs)
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "on the first SIGINT or SIGTERM, how long the batches in flight may take to finish")
	fs.StringVar(&f.journal, "journal", "", "resume journal `PATH` (default: under ~/.local/state/bulkmove, keyed by SRC, DEST and options; none: no journal)")
	fs.BoolVar(&f.dryRun, "n", false, "dry run: print what would move and the batch plan, move nothing")
	fs.BoolVar(&f.dryRun, "dry-run", false, "dry run: print what would move and the batch plan, move nothing")
	fs.BoolVar(&f.verbose, "v", false, "verbose: per-stream statistics and every batch")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.BoolVar(&f.fsync, "fsync", false, "make each batch durable (fsync files and directories) before it is acknowledged")
	fs.BoolVar(&f.keepSetid, "keep-setid", false, "keep setuid and setgid bits (and, with -X, file capabilities)")
	fs.BoolVar(&f.noOwner, "no-owner", false, "do not keep owners: files belong to the receiving user, even where it runs as root")
	fs.BoolVar(&f.noCheck, "no-quick-check", false, "send every file, even those already at DEST with the same size and mtime")
	fs.BoolVar(&f.checksum, "c", false, "same as --checksum")
	fs.BoolVar(&f.checksum, "checksum", false, "skip files at DEST with the same size and content (XXH3-128, hashed on both sides), whatever their mtime")
	fs.BoolVar(&f.sizeOnly, "size-only", false, "skip files at DEST with the same size, whatever their mtime")
	fs.BoolVar(&f.ignoreExisting, "ignore-existing", false, "skip files (and symlinks) that exist at DEST, whatever their content")
	f.obs.register(fs)
	f.gentle.register(fs)
	f.scale.register(fs)
	f.faithful.register(fs)
	f.split.register(fs)
	fs.StringVar(&f.progress, "progress", "auto", "progress display on a terminal: auto (one line), streams (a line per stream too), none")
	fs.BoolVar(&f.json, "json", false, "write newline-delimited JSON events on stdout (start, progress, warning, error, bottleneck, streams, end; see docs/observability.md)")
	fs.BoolVar(&f.viaAgent, "via-agent", false, "run K local `bulkmove agent` processes and talk the wire protocol to them (the SSH path, without SSH)")
	fs.IntVar(&f.ssh.port, "p", 0, "SSH port of the remote host")
	fs.IntVar(&f.ssh.port, "port", 0, "SSH port of the remote host")
	fs.Var(&f.ssh.identities, "i", "SSH identity `file` (repeatable)")
	fs.Var(&f.ssh.identities, "identity", "SSH identity `file` (repeatable)")
	fs.StringVar(&f.ssh.config, "F", "", "SSH config `file` instead of ~/.ssh/config")
	fs.StringVar(&f.ssh.config, "ssh-config", "", "SSH config `file` instead of ~/.ssh/config")
	fs.StringVar(&f.ssh.jump, "J", "", "jump through `[user@]host[:port][,...]` (overrides ProxyJump)")
	fs.StringVar(&f.ssh.jump, "jump", "", "jump through `[user@]host[:port][,...]` (overrides ProxyJump)")
	fs.BoolVar(&f.ssh.acceptNew, "accept-new-host-key", false, "record the host key of a host not yet in known_hosts (a changed key is always refused)")
	fs.BoolVar(&f.ssh.passwordAuth, "password-auth", false, "allow password authentication, asked on the terminal")
	fs.DurationVar(&f.ssh.linger, "linger", 0, "keep the remote agent `duration` after the job, so that the next push to the host starts at once, without a login shell (a later push without --linger uses it and ends it)")
	fs.StringVar(&f.ssh.remoteBulkmove, "remote-bulkmove", "", "`path` of bulkmove on the remote host (default: bulkmove on its PATH, else upload this binary)")
}

// byteSize is a flag of a size with an optional unit: 64MiB, 64m, 1G, 4096.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// countFlag is a count of 0 or more that may be left unset.
type countFlag struct {
	n   int64
	set bool
}

func (c *countFlag) String() string {
	if !c.set {
		return ""
	}
	return strconv.FormatInt(c.n, 10)
}

func (c *countFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a count of 0 or more, got %q", s)
	}
	c.n, c.set = n, true
	return nil
}

// parseSize reads a size flag's value as units.ParseSize does (a bare
// number is bytes, as rsync reads its sizes); 0 is refused.
func parseSize(s string) (int64, error) {
	n, err := units.ParseSize(s, units.BareBytes)
	if err == nil && n == 0 {
		err = fmt.Errorf("size %q: want more than 0 (e.g. 64M, 1.5G, 4096)", s)
	}
	return n, err
}

type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func RunMove(args []string, stdout, stderr io.Writer) int {
	var f moveFlags
	fs := flag.NewFlagSet("bulkmove", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, moveUsage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, exitCodesHelp)
	}
	f.register(fs)
	fs.String("config", "", "read defaults and profiles from `FILE` (default ~/.config/bulkmove/config; see docs/configuration.md)")
	fs.String("profile", "", "run the job `NAME` of the config file (its src, dst and flags)")
	cfgFlags, cfgSrc, cfgDst, err := configArgs(args)
	if err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return ExitUsage
	}
	if err := fs.Parse(cfgFlags); err != nil {
		termsafe.Errorf(stderr, "config: %v", err)
		return ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() == 0 && cfgSrc != "" && cfgDst != "" {
		fs.Parse([]string{"--", cfgSrc, cfgDst})
	}
	if f.version {
		return RunVersion(nil, stdout, stderr)
	}
	if f.deleteExcluded {
		f.delete = true
	}
	if _, err := f.checkMode(); err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return ExitUsage
	}
	if err := f.scale.check(&f); err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return ExitUsage
	}
	if !checkArgs(fs, &f, "bulkmove", stderr) {
		return ExitUsage
	}
	if err := f.obs.check(); err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return ExitUsage
	}
	switch f.transport {
	case "ssh", "tls", "tcp", "auto":
	default:
		termsafe.Errorf(stderr, "--transport %q: want ssh, tls, tcp or auto", f.transport)
		return ExitUsage
	}
	if _, _, err := dataplane.ParsePorts(f.dataPorts); err != nil {
		termsafe.Errorf(stderr, "--data-ports: %v", err)
		return ExitUsage
	}
	if f.dataAddr != "" && net.ParseIP(strings.Trim(f.dataAddr, "[]")) == nil {
		termsafe.Errorf(stderr, "--data-addr %q: want an IP address of the remote host (0.0.0.0 or :: for all)", f.dataAddr)
		return ExitUsage
	}
	f.gentle.Apply(stderr) // early: every thread of the process takes them
	var lf *logFile
	if f.logFile != "" {
		var err error
		if lf, err = openLog(f.logFile, f.logLevel); err != nil {
			termsafe.Errorf(stderr, "%v", err)
			return ExitUsage
		}
		defer lf.Close()
		stderr = teeLog(stderr, lf)
		termsafe.Errorf(lf, "start: bulkmove %s", strings.Join(args, " "))
	}
	j := &job{flags: f, stdout: stdout, stderr: stderr, src: fs.Arg(0), dst: fs.Arg(1), log: lf}
	ctx, drain, stop := j.interrupts(context.Background(), f.grace)
	defer stop()
	j.drain = drain
	if f.json {
		j.ev = newEvents(stdout)
	}
	return j.run(ctx)
}

// checkArgs checks what every command that moves or compares SRC and
// DEST needs: both, and a sane -j. It reports on stderr.
func checkArgs(fs *flag.FlagSet, f *moveFlags, cmd string, stderr io.Writer) bool {
	if fs.NArg() != 2 {
		termsafe.Errorf(stderr, "want SRC and DEST, got %d arguments (see %s -h)", fs.NArg(), cmd)
		return false
	}
	if (f.maxDelete.set || f.noDeleteGuard) && !f.delete {
		termsafe.Errorf(stderr, "--max-delete and --no-delete-guard go with --delete")
		return false
	}
	if err := f.checkCounts(fs); err != nil {
		termsafe.Errorf(stderr, "%v", err)
		return false
	}
	return true
}

// checkCounts refuses a count flag, or a duration, outside its range,
// naming the flag and the range. --io-concurrency and --nice check
// theirs as they are parsed.
func (f *moveFlags) checkCounts(fs *flag.FlagSet) error {
	for _, c := range []struct {
		flag   string
		v      int
		lo, hi int
		unit   string
	}{
		{"-j", f.jobs, 1, 256, " streams"},
		{"--max-streams", f.auto.max, 1, 256, " streams"},
		{"--batch-files", f.batchFiles, 1, wire.MaxEntries, " files"},
		{"--retries", f.retries, 1, 1000, ""},
		{"--port", f.ssh.port, 0, 65535, " (0: the SSH config's, else 22)"},
	} {
		if c.v < c.lo || c.v > c.hi {
			return fmt.Errorf("%s %d: want %d to %d%s", c.flag, c.v, c.lo, c.hi, c.unit)
		}
	}
	var err error
	fs.VisitAll(func(fl *flag.Flag) {
		g, ok := fl.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		if d, ok := g.Get().(time.Duration); ok && d < 0 {
			err = fmt.Errorf("--%s %s: want a duration of 0 or more", fl.Name, d)
		}
	})
	return err
}
