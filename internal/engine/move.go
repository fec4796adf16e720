package engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/stream"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/local"
	"github.com/bulkmove/bulkmove/transport/sshx"
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
	f.compress.Mode = stream.CompressAuto
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

func (l *stringList) String() string     { return strings.Join(*l, ",") }
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

// job is one run of the main command.
type job struct {
	flags          moveFlags
	stdout, stderr io.Writer
	src, dst       string

	mu            sync.Mutex
	files         int64 // regular files installed
	bytes         int64
	links         int64                                           // symlinks, hard links and directories applied
	skipped       int64                                           // up to date already
	resumed       int64                                           // of those, named by the resume journal
	resent        int64                                           // files the resume journal named that DEST did not hold as sent
	deleted       int64                                           // removed from DEST by --delete
	changed       int64                                           // files that changed while read, twice
	deleteSkipped bool                                            // --delete refused: something failed
	deleteRefused bool                                            // --delete refused by its guard
	deleteHeld    int64                                           // entries --max-delete kept from going
	res           *resume                                         // the journal; nil without one
	redial        func(context.Context, int) (stream.Conn, error) // reopens a lost stream (SSH)
	addConn       func(context.Context, int) (stream.Conn, error) // opens one more stream (-j auto)
	rtt           func() time.Duration                            // measures the round trip to the remote host (-j auto)
	prepare       func(context.Context, int) (done func())        // opens connections ahead for addConn (-j auto)
	drain         <-chan struct{}                                 // closed by the first interrupt
	interrupted   atomic.Bool
	log           *logFile                // --log-file; nil without
	stopWalk      context.CancelCauseFunc // ends the walk with a cause
	free          atomic.Int64            // free space at DEST, 0 if unknown
	spaceWarned   atomic.Bool
	serveAddr     string           // DEST is bulkmove://serveAddr/...
	share         stream.AutoShare // --compress auto: what the streams tell each other
	failed        int64            // entries that could not be moved
	walkErrs      int64
	warnings      int64
	start         time.Time
	remote        *sshx.Target // DEST's host, nil for a local DEST
	bw            *bwControl   // the bandwidth limit (bwlimit.go)
	m             *metrics.Job
	ev            *events  // --json; nil otherwise
	hub           []duplex // send-hub: the streams the receiver opened
	as            string   // send-hub: the name of a single-file SRC at the receiver
}

func (j *job) run(ctx context.Context) int {
	j.start = time.Now()
	if j.hub == nil {
		t, remote, err := sshx.ParseTarget(j.src)
		if err != nil {
			termsafe.Errorf(j.stderr, "%v", err)
			return ExitUsage
		}
		if remote {
			if _, r, _ := sshx.ParseTarget(j.dst); r {
				termsafe.Errorf(j.stderr, "both SRC and DEST are remote: run bulkmove on one of the hosts")
				return ExitUsage
			}
			return j.pull(ctx, t)
		}
	}
	plan, code := j.resolve(ctx)
	if code != ExitOK {
		return code
	}
	j.flags.faithful.source(&plan.src)
	j.autoStart()
	plan.src.IO = j.flags.ioConc.gauge()
	opt := sharder.Options{
		BatchBytes:    int64(j.flags.batchSize),
		BatchFiles:    j.flags.batchFiles,
		Filter:        j.flags.rules,
		OneFileSystem: j.flags.oneFS,
		Concurrency:   int(j.flags.ioConc),
		IO:            plan.src.IO,
		OnError: func(p string, err error) {
			j.mu.Lock()
			j.walkErrs++
			j.mu.Unlock()
			termsafe.Errorf(j.stderr, "%v", err)
			j.ev.problem("error", p, err.Error())
		},
		OnWarn: func(p, msg string) {
			j.mu.Lock()
			j.warnings++
			j.mu.Unlock()
			termsafe.Errorf(j.stderr, "warning: %s: %s", filepath.Join(j.src, filepath.FromSlash(p)), msg)
			j.ev.problem("warning", p, msg)
		},
	}
	if plan.src.File != "" {
		opt.Name = filepath.Base(j.src) // a symlink's name, if SRC is one
	}
	j.flags.split.apply(&opt, &j.flags)
	linkMem, err := EnvCount("BULKMOVE_LINK_MEM", "hard-link sets")
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitUsage
	}
	opt.LinkMem = int(linkMem)
	closeList, err := j.flags.scale.apply(&opt, os.Stdin)
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitFatal
	}
	defer closeList()
	if j.flags.dryRun {
		return j.dryRun(ctx, plan, opt)
	}

	res, jerr := j.openJournal()
	if jerr != nil {
		termsafe.Errorf(j.stderr, "%v", jerr)
		return ExitFatal
	}
	j.res = res
	if j.ev != nil {
		st := &StartEvent{Version: Version, Src: j.src, Dst: j.dst, Streams: j.flags.jobs}
		j.ev.emit("start", &st.Head, st)
	}
	// The walk starts at once, while the streams connect: on a pass over
	// an unchanged tree it is most of the work.
	// Directories, symlinks and hard links wait for the end; beyond what
	// memory holds they wait on disk, beside the journal if there is one
	// (TMPDIR is often a tmpfs: memory again).
	def := &stream.Deferred{Dir: j.res.dir()}
	defer def.Close()
	opt.Deferred = def.Add
	opt.SpillDir = j.res.dir() // and so do the names of hard-linked files past LinkMem open sets
	// Room for the walk to run ahead while the streams connect (about
	// 100 KiB a batch of 1,000 small files: 13 MiB at most).
	batches := make(chan *model.Batch, 2*j.flags.jobs+128)
	// Whether to spread batches over directories: the receivers say once
	// connected (the walk holds a few thousand files until then).
	spread := make(chan bool, 1)
	opt.Spread = spread
	j.m = j.newMetrics()
	if sh := j.flags.scale.shard; !sh.All() {
		j.m.Shard = sh.String() // a shard label on the job's metrics
	}
	j.m.SourceLatency = plan.src.IO.Latency
	defer j.limit(&plan)()
	wctx, stopWalkCause := context.WithCancelCause(ctx)
	stopWalk := func() { stopWalkCause(nil) }
	defer stopWalk()
	j.stopWalk = stopWalkCause
	g, gctx := errgroup.WithContext(wctx)
	g.Go(func() error {
		_, err := sharder.Run(gctx, plan.walkRoot, opt, j.relay(gctx, batches, plan.rename))
		j.m.WalkDone.Store(true)
		if cause := context.Cause(gctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause // the walk was stopped for a reason (--require-space)
		}
		if err != nil && !(j.interrupted.Load() && errors.Is(err, context.Canceled)) {
			return fmt.Errorf("walk %s: %w", j.src, err)
		}
		return nil
	})
	conns, cleanup, err := j.connect(ctx, plan)
	if err != nil {
		j.res.unbind()
		stopWalk()
		g.Wait()
		j.res.close(false)
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitFatal
	}
	defer cleanup()
	j.trace("connected %d streams", len(conns))
	j.warnDenied(conns)
	slow, destID := destSays(conns)
	if err := j.bindJournal(destID); err != nil {
		termsafe.Errorf(j.stderr, "warning: %v; this run leaves out nothing the journal holds", err)
	}
	if slow {
		j.trace("DEST answers each file operation after a round trip: batches take their files from many directories in turn")
	}
	spread <- slow
	j.free.Store(destFree(conns, plan.dstRoot))
	if err := j.checkSpace(j.m.PlannedBytes.Load()); err != nil {
		// What the walk found while connecting is already too much.
		stopWalk()
		g.Wait()
		j.res.close(false)
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitFatal
	}
	j.connected(len(conns))
	pool := &stream.Pool{Conns: conns, FinalFiles: j.flags.batchFiles, OnResult: j.onResult, Counters: j.m.Streams, Limit: j.bw.b,
		OnPhase: func(name string) { j.trace("%s", name) }}
	if j.flags.delete && plan.rename == "" {
		pool.BeforeFinal = j.deletePass(plan)
	}
	if j.flags.compress.Mode == stream.CompressAuto && slices.ContainsFunc(conns, isClient) {
		pool.Opening = openingCost // the first batches measure the link
	}
	pool.Retries, pool.ReconnectTimeout = j.flags.retries, j.flags.reconnectTimeout
	if j.flags.reconnectTimeout > 0 {
		pool.Redial = j.redial
	}
	pool.OnWarn = func(msg string) { termsafe.Errorf(j.stderr, "warning: %s", msg) }
	if plan.src.File == "" {
		root := plan.src.Root
		pool.Restat = func(e model.Entry) (model.Entry, bool) { return sharder.Restat(root, e) }
	}
	stopProgress := j.progress(ctx) // before anything else writes to stderr
	stopObs, err := j.observe(ctx, j.remote == nil && j.hub == nil && !j.flags.viaAgent)
	if err != nil {
		stopProgress()
		termsafe.Errorf(j.stderr, "%v", err)
		return ExitUsage
	}
	pool.Drain = j.drain
	stopAuto := j.steer(gctx, pool, j.remote == nil && j.hub == nil && !j.flags.viaAgent)
	g.Go(func() error {
		err := pool.Run(gctx, batches, def)
		if j.interrupted.Load() {
			stopWalk() // the pool took what it will: the walk can stop
		}
		return err
	})
	err = g.Wait()
	if cause := context.Cause(wctx); cause != nil && !errors.Is(cause, context.Canceled) && errors.Is(err, context.Canceled) {
		// The walk was stopped for a reason (--require-space), and the
		// pool, cancelled with it, may have returned first.
		err = cause
	}
	stopAuto()
	stopObs()
	stopProgress()
	if j.flags.verbose {
		for i, s := range pool.Stats() {
			by := ""
			if i < len(j.m.Streams) {
				if n := j.m.Streams[i].SendfileBytes.Load(); n > 0 {
					by = fmt.Sprintf(" (%s by sendfile)", units.Size(n))
				}
			}
			termsafe.Errorf(j.stderr, "stream %d: %d batches, %d files, %s%s, busy until %.2fs", i, s.Batches, s.Files, units.Size(s.Bytes), by, s.Done.Seconds())
		}
	}
	interrupted := ctx.Err() != nil || j.interrupted.Load()
	if jerr := j.res.close(err == nil && !interrupted && j.failed == 0 && j.walkErrs == 0); jerr != nil {
		termsafe.Errorf(j.stderr, "warning: %v", jerr)
	}
	j.summary(err, interrupted)
	exit := ExitOK
	switch {
	case interrupted:
		exit = ExitInterrupted
	case err != nil || j.deleteRefused:
		exit = ExitFatal
	case j.failed > 0 || j.walkErrs > 0:
		exit = ExitPartial
	case j.deleteHeld > 0:
		exit = ExitMaxDelete
	}
	j.end(pool, err, exit)
	return exit
}

// end emits the --json summary.
func (j *job) end(pool *stream.Pool, err error, code int) {
	if j.ev == nil {
		return
	}
	j.ev.progress(j.m, true)
	el := time.Since(j.start).Seconds()
	j.mu.Lock()
	e := &EndEvent{Files: j.files, Bytes: j.bytes, Links: j.links, Skipped: j.skipped, Resumed: j.resumed, Errors: j.failed + j.walkErrs,
		Elapsed: el, BytesRate: float64(j.bytes) / el, FilesRate: float64(j.files) / el, ExitCode: code,
		Streams: streamTotals(pool.Stats()), Bottleneck: metrics.Idle}
	j.mu.Unlock()
	if v := j.m.Verdict(); v != nil {
		e.Bottleneck = v.Resource
	}
	e.WireBytes = j.m.WireBytes()
	e.CompressedIn, e.CompressedOut = j.m.Compressed()
	if err != nil {
		e.Error = err.Error()
	}
	j.ev.emit("end", &e.Head, e)
}

// relay forwards batches to the pool, counting what the walk plans and
// renaming the single entry of a one-file job.
func (j *job) relay(ctx context.Context, out chan *model.Batch, rename string) chan<- *model.Batch {
	in := make(chan *model.Batch)
	go func() {
		defer close(out)
		for b := range in {
			if rename != "" {
				for i := range b.Entries {
					b.Entries[i].Path = rename
				}
			}
			toMove := b.Bytes
			for i := range b.Entries {
				if e := &b.Entries[i]; j.res.named(e) {
					// Most likely in place still: not counted against
					// DEST's free space, nor as still to move.
					e.Resumed = true
					toMove -= e.Size
				}
			}
			planned := j.m.PlannedBytes.Add(toMove)
			files := int64(len(b.Entries))
			for i := range b.Entries {
				if b.Entries[i].Off > 0 {
					files-- // a later range of a split file
				}
			}
			j.m.PlannedFiles.Add(files)
			if err := j.checkSpace(planned); err != nil {
				j.stopWalk(err)
				return
			}
			select {
			case out <- b:
			case <-ctx.Done():
			}
		}
	}()
	return in
}

// plan is where the job reads and writes.
type plan struct {
	walkRoot string // what the sharder walks
	src      stream.Source
	dstRoot  string // the receiver's root
	rename   string // for a single-file SRC, its name under dstRoot
	srcReal  string // SRC, resolved: what it names, with no symlink on the way
}

func (j *job) resolve(ctx context.Context) (plan, int) {
	var p plan
	if j.hub != nil {
		return j.resolveHub()
	}
	t, remote, err := sshx.ParseTarget(j.dst)
	if strings.HasPrefix(j.dst, serveScheme) {
		t, remote, err = j.parseServe(j.dst)
	}
	if err != nil {
		termsafe.Errorf(j.stderr, "%v", err)
		return p, ExitUsage
	}
	if remote {
		j.remote = &t
	}
	src, fi, err := resolveSrc(j.src)
	if err != nil {
		termsafe.Errorf(j.stderr, "source %s: %v", j.src, Unwrap(err))
		return p, ExitFatal
	}
	p.srcReal = src
	dst := ""
	if j.remote == nil {
		if dst, err = ResolveDest(j.dst); err != nil {
			termsafe.Errorf(j.stderr, "destination %s: %v", j.dst, Unwrap(err))
			return p, ExitFatal
		}
	}
	if fi.IsDir() {
		d, err := os.Open(src)
		if err != nil {
			termsafe.Errorf(j.stderr, "source %s: %v", j.src, Unwrap(err))
			return p, ExitFatal
		}
		d.Close()
		p.walkRoot, p.src.Root = src, src
		if j.remote != nil {
			p.dstRoot = j.remote.Path
			return p, ExitOK
		}
		p.dstRoot = dst
		if dfi, err := os.Stat(dst); err == nil && !dfi.IsDir() {
			termsafe.Errorf(j.stderr, "destination %s is an existing file, but the source %s is a directory", j.dst, j.src)
			return p, ExitUsage
		}
		return p, j.refuseOverlap(src, dst, j.dst)
	}
	if !fi.Mode().IsRegular() {
		termsafe.Errorf(j.stderr, "source %s is not a regular file or directory", j.src)
		return p, ExitFatal
	}
	// A single file: into DEST if DEST is a directory, else as DEST. In a
	// directory it takes the name it was given (a symlink's, if SRC is
	// one), as cp does.
	name := filepath.Base(j.src)
	p.walkRoot = src
	p.src = stream.Source{Root: filepath.Dir(src), File: src}
	if j.remote != nil {
		p.rename = name
		j.remoteDest(ctx, *j.remote, &p)
		return p, ExitOK
	}
	target := filepath.Join(j.dst, name)
	if dfi, err := os.Stat(dst); err == nil && dfi.IsDir() {
		p.dstRoot = dst
		p.rename = name
	} else {
		p.dstRoot = filepath.Dir(dst)
		p.rename = filepath.Base(dst)
		target = j.dst
	}
	return p, j.refuseOverlap(src, filepath.Join(p.dstRoot, p.rename), target)
}

// refuseOverlap refuses (ExitUsage) a local job whose SRC (src, resolved)
// and DEST (dst, resolved; named dstName) Overlap.
func (j *job) refuseOverlap(src, dst, dstName string) int {
	refused, err := checkOverlap(j.src, src, dstName, dst)
	if err == nil {
		return ExitOK
	}
	termsafe.Errorf(j.stderr, "%v", err)
	if refused {
		return ExitUsage
	}
	return ExitFatal
}

func (j *job) receiveOptions() wire.ReceiveOptions {
	// Owner: keep numeric uid/gid wherever the receiver runs as root.
	o := wire.ReceiveOptions{Fsync: j.flags.fsync, Owner: !j.flags.noOwner, KeepSetid: j.flags.keepSetid, Check: wire.CheckQuick,
		IOConcurrency: int(j.flags.ioConc), NoSums: j.flags.noVerifyTransfer, Delete: j.flags.delete}
	if mode, err := j.flags.checkMode(); err == nil { // checked with the other flags
		o.Check = mode
	}
	j.flags.faithful.receive(&o)
	return o
}

// connect opens the K streams.
func (j *job) connect(ctx context.Context, p plan) ([]stream.Conn, func(), error) {
	if j.serveAddr != "" {
		return j.connectServe(ctx, p)
	}
	if j.remote != nil {
		conns, l, err := j.connectSSH(ctx, *j.remote, p)
		if err != nil {
			return nil, nil, err
		}
		j.redial = l.redial
		if l.data == "" {
			g := l.growth()
			j.addConn, j.rtt, j.prepare = g.add, l.pathRTT, g.prepare
		}
		return conns, l.close, nil
	}
	if j.hub != nil {
		return j.connectHub(ctx, p)
	}
	ro := j.receiveOptions()
	if !j.flags.viaAgent {
		recv, err := extract.Open(p.dstRoot, extract.FromWire(&ro))
		if err != nil {
			return nil, nil, fmt.Errorf("destination %s: %w", j.dst, Unwrap(err))
		}
		conns := make([]stream.Conn, j.flags.jobs)
		for i := range conns {
			conns[i] = &local.Conn{Recv: recv, Src: p.src}
		}
		j.addConn = func(context.Context, int) (stream.Conn, error) { return &local.Conn{Recv: recv, Src: p.src}, nil }
		return conns, func() { recv.Close() }, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var conns []stream.Conn
	var cmds []*exec.Cmd
	cleanup := func() {
		for _, c := range cmds {
			c.Wait()
		}
	}
	for i := range j.flags.jobs {
		cmd := exec.Command(self, slices.Concat([]string{"agent"}, j.flags.gentle.NiceFlags.Args(), j.allowed().Args(), []string{"--", p.dstRoot})...)
		cmd.Stderr = j.stderr
		w, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		r, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, nil, fmt.Errorf("start agent: %w", err)
		}
		cmds = append(cmds, cmd)
		c, err := stream.Dial(ctx, fmt.Sprintf("stream %d", i), r, w, w, Version, ro, p.src)
		if err != nil {
			cleanup()
			return nil, nil, stream.RefusedBy("the agent", err)
		}
		j.configure(c)
		conns = append(conns, c)
	}
	return conns, cleanup, nil
}

// trace reports, with -v, the time since the start at which the job
// reached a phase.
func (j *job) trace(format string, args ...any) {
	args = append([]any{time.Since(j.start).Seconds()}, args...)
	switch {
	case j.flags.verbose:
		termsafe.Errorf(j.stderr, "%6.3fs "+format, args...)
	case j.log != nil && j.log.debug:
		termsafe.Errorf(j.log, "%6.3fs "+format, args...)
	}
}

func (j *job) onResult(r stream.Result) {
	j.res.record(r)
	resumed, resent := confirmed(r)
	j.mu.Lock()
	defer j.mu.Unlock()
	if r.Ack != nil {
		if r.Final {
			j.links += r.Ack.Files
		} else {
			j.files += r.Ack.Files
			j.m.DoneFiles.Add(r.Ack.Files)
		}
		j.m.DoneBytes.Add(r.Ack.Bytes)
		j.m.Skipped.Add(r.Ack.Skipped)
		j.m.Failed.Add(int64(len(r.Ack.Errors) + len(r.SrcErrors)))
		j.bytes += r.Ack.Bytes
		j.skipped += r.Ack.Skipped
		j.resumed += resumed
		j.resent += resent
		for _, e := range r.Ack.Errors {
			j.failed++
			termsafe.Errorf(j.stderr, "%s: %s", j.dst, e.Msg)
			j.ev.problem("error", r.Batch.Entries[e.Index].Path, e.Msg)
		}
	}
	for _, e := range r.SrcErrors {
		j.failed++
		if errors.Is(e.Err, stream.ErrChanged) {
			j.changed++
		}
		termsafe.Errorf(j.stderr, "%v", e.Err)
		j.ev.problem("error", r.Batch.Entries[e.Index].Path, e.Err.Error())
	}
	if j.ev != nil {
		j.ev.progress(j.m, false)
	}
	if j.flags.verbose && !r.Final && r.Ack != nil {
		termsafe.Errorf(j.stderr, "batch %d on stream %d: %d files, %s", r.Batch.ID, r.Stream, r.Ack.Files, units.Size(r.Ack.Bytes))
	}
}

func (j *job) summary(err error, interrupted bool) {
	el := time.Since(j.start)
	j.mu.Lock()
	defer j.mu.Unlock()
	rate := float64(j.bytes) / el.Seconds()
	deleted := ""
	if j.flags.delete {
		deleted = fmt.Sprintf("; %d deleted", j.deleted)
		switch {
		case j.deleteSkipped:
			deleted = "; deletion skipped (errors)"
		case j.deleteRefused:
			deleted = "; deletion refused (the --delete guard)"
		case j.deleteHeld > 0:
			deleted += fmt.Sprintf(" (%d more held back by --max-delete)", j.deleteHeld)
		}
	}
	if j.changed > 0 {
		deleted += fmt.Sprintf("; %d changed during transfer", j.changed)
	}
	resumed := ""
	if j.resumed > 0 {
		// Found in place by the receiver, as the journal said an earlier
		// run left them.
		resumed = fmt.Sprintf(" (%d of them named by the resume journal)", j.resumed)
	}
	if j.resent > 0 {
		termsafe.Errorf(j.stderr, "warning: %d files the resume journal named were not in place at %s (deleted or changed there since): sent again", j.resent, j.dst)
	}
	line := fmt.Sprintf("%d files, %s in %.2fs (%s/s, %.0f files/s)%s; %d up to date%s%s; %d errors%s",
		j.files, units.Size(j.bytes), el.Seconds(), units.Size(int64(rate)), float64(j.files)/el.Seconds(), compression(j.m), j.skipped, resumed, deleted, j.failed+j.walkErrs, j.bottleneck())
	switch {
	case interrupted:
		termsafe.Errorf(j.stderr, "interrupted: %s; run the same command again to finish", line)
	case err != nil:
		termsafe.Errorf(j.stderr, "%v", err)
		if errors.Is(err, stream.ErrNoSpace) && j.m != nil {
			left := max(j.m.PlannedBytes.Load()-j.m.DoneBytes.Load(), 0)
			termsafe.Errorf(j.stderr, "%s is full: %s of the %s found so far still to move (more if the walk was not over); "+
				"what was acknowledged is in place: free some space and run the same command again to resume",
				j.dst, units.Size(left), units.Size(j.m.PlannedBytes.Load()))
		}
		termsafe.Errorf(j.stderr, "failed: %s", line)
	default:
		termsafe.Errorf(j.stderr, "%s", line)
	}
}

func Unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
