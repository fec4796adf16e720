package main

import (
	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/sharder"
)

// The flags of the commands that move or compare: each binds a field of
// engine.Config, whose defaults are engine.DefaultConfig's (the value a
// field holds when it is registered). A command registers only the flags
// it takes: verify those of registerCompare, a move those and
// registerMove's.

// registerCompare registers what moving and comparing share: the streams
// and how they travel, the walk, what is kept, --json.
func registerCompare(fs *pflag.FlagSet, c *engine.Config) {
	section(fs, "common", func() {
		fs.VarP(engine.JobsValue{C: c}, "jobs", "j", "number of parallel streams, `N|auto`: auto starts with a few and adds more while throughput rises, up to --max-streams")
		fs.VarPF(&verboseCount{on: &c.Verbose}, "verbose", "v", "per-stream statistics and every batch (-vv: the same)").NoOptDefVal = "+1"
	})
	section(fs, "implied", func() { registerRsyncImplied(fs) })
	section(fs, "output", func() {
		fs.VarPF(&verboseCount{count: &c.Human}, "human-readable", "h", "--stats' numbers in units (588.91K), as rsync's -h; -hh in units of 1024; sizes elsewhere are always written for people (-h alone, with no SRC and DEST, prints this help)").NoOptDefVal = "+1"
	})
	section(fs, "filters", func() {
		// The filter flags share one list of rules, in command-line order.
		fs.Var(c.Rules.Flag(filter.Exclude), "exclude", "leave out paths matching `PATTERN`, an rsync pattern (repeatable; see docs/filters.md)")
		fs.Var(c.Rules.Flag(filter.Include), "include", "keep paths matching `PATTERN` that a later rule would leave out (repeatable)")
		fs.Var(c.Rules.FileFlag(filter.Exclude), "exclude-from", "read --exclude patterns from `FILE`, one a line; - is stdin (repeatable)")
		fs.Var(c.Rules.FileFlag(filter.Include), "include-from", "read --include patterns from `FILE`, one a line; - is stdin (repeatable)")
		fs.VarP(c.Rules.Flag(filter.Filter), "filter", "f", "add an rsync filter `RULE`: '- PAT', '+ PAT', '!', '. FILE', ': FILE', ... (repeatable)")
		fs.VarPF(c.Rules.FFlag(), "rsync-filter", "F", "rsync's -F: --filter 'dir-merge /.rsync-filter' (each directory's .rsync-filter file holds rules for its subtree; those of SRC's parents count too); -FF also --filter '- .rsync-filter'").NoOptDefVal = "true"
		fs.BoolVarP(&c.CVSExclude, "cvs-exclude", "C", c.CVSExclude, "leave out what CVS would, after the other rules: rsync's list (*.o, core, .git/, ...), ~/.cvsignore, $CVSIGNORE, and each directory's .cvsignore for its names")
		fs.BoolVarP(&c.OneFS, "one-file-system", "x", c.OneFS, "do not cross filesystem boundaries: a mount point under SRC is moved as an empty directory")
		fs.StringVar(&c.Scale.FilesFrom, "files-from", c.Scale.FilesFrom, "move exactly the paths `FILE` lists (relative to SRC, one a line; - is stdin), with their parent directories, without recursing into listed directories (rsync's --files-from)")
		fs.BoolVarP(&c.Scale.From0, "from0", "0", c.Scale.From0, "the --files-from list is NUL-separated")
		fs.Func("shard", "take the `i/N`-th of N disjoint parts of SRC (0 <= i < N; by a hash of each directory's path), so N processes cover SRC once", func(s string) error {
			sh, err := sharder.ParseShard(s)
			if err != nil {
				return err
			}
			c.Scale.Shard = sh
			return nil
		})
	})
	section(fs, "kept", func() {
		fs.BoolVar(&c.KeepSetid, "keep-setid", c.KeepSetid, "keep setuid and setgid bits (and, with -X, file capabilities)")
		fs.BoolVar(&c.NoOwner, "no-owner", c.NoOwner, "do not keep owners: files belong to the receiving user, even where it runs as root")
		fs.Func("chown", "give every entry the owner `USER:GROUP` (a name on the receiver, or a number; USER, USER: or :GROUP change one), as rsync: --usermap='*:USER' --groupmap='*:GROUP'", c.Owners.SetChown)
		fs.Func("usermap", "map owners as rsync: `FROM:TO,...`, first match wins; FROM is an id, a range LOW-HIGH, a sender's user name, a wildcard (*, ?, [...]) or empty (users without a name); TO a user name on the receiver or an id (see docs/rsync.md)", c.Owners.SetUserMap)
		fs.Func("groupmap", "map groups as --usermap maps users: `FROM:TO,...`", c.Owners.SetGroupMap)
		fs.BoolVar(&c.Owners.ByName, "no-numeric-ids", c.Owners.ByName, "give an owner no map names the receiver's id of the sender's name for it, as rsync does by default (bulkmove keeps the numbers: --numeric-ids)")
		fs.Func("chmod", "change the modes sent, as rsync: `CHMOD` is comma-separated chmod(1) modes ([ugoa][-+=][rwxXst], g=u, octal), each prefixed D for directories alone or F for the rest (D2775,F664; u+w; Fgo-w; a+rX); repeatable", c.Owners.AddChmod)
		fs.BoolVarP(&c.Faithful.Xattrs, "xattrs", "X", c.Faithful.Xattrs, "copy extended attributes: user.*, and where the receiver runs as root trusted.* and security.* (SELinux labels, file capabilities)")
		fs.BoolVarP(&c.Faithful.ACLs, "acls", "A", c.Faithful.ACLs, "copy POSIX ACLs (access ACLs, and default ACLs of directories)")
		fs.BoolVar(&c.Faithful.Sparse, "sparse", c.Faithful.Sparse, "send a file's holes as holes (SEEK_DATA/SEEK_HOLE) and recreate them at DEST; --sparse=false sends them as zeros")
		fs.VarPF(bothFlags{&c.Faithful.Devices, &c.Faithful.Specials}, "devices-and-specials", "D", "rsync's -D: --devices and --specials").NoOptDefVal = "true"
		fs.BoolVar(&c.Faithful.Devices, "devices", c.Faithful.Devices, "copy character and block devices, with their numbers: made where the receiver runs as root (a serve: with --allow-devices), refused by name elsewhere; without it they are skipped with a warning")
		fs.BoolVar(&c.Faithful.Specials, "specials", c.Faithful.Specials, "copy FIFOs and sockets; without it they are skipped with a warning")
		fs.BoolVar(&c.Faithful.FakeSuper, "fake-super", c.Faithful.FakeSuper, "rsync's --fake-super on this host's end: a DEST here keeps owners, setuid bits, devices and special files in each file's user.rsync.%stat attribute instead of making them (files stay the receiving user's); a SRC here is read through those attributes; a local move: both (see docs/faithful.md)")
		fs.VarP(remoteOption{&c.Faithful.RemoteFakeSuper, &c.Faithful.RemoteSuper}, "remote-option", "M", "rsync's -M, for the remote end: `--fake-super` (a push's receiver keeps what it cannot set in user.rsync.%stat, a pull's sender reads SRC through it; a local move's DEST) or --super (with --fake-super, a local move's DEST is made for real: the restore of a fake-super SRC)")
	})
	section(fs, "transport", func() {
		fs.StringVar(&c.Transport, "transport", c.Transport, "how the streams travel to a remote host: ssh (K SSH connections), tls (SSH starts the agent, the streams go over TLS 1.3 straight to it), tcp (the same, unencrypted), auto (tls, else ssh)")
		fs.SetAnnotation("transport", annValue, []string{"ssh|tls|tcp|auto"})
		fs.StringVar(&c.DataPorts, "data-ports", c.DataPorts, "port `range` the agent listens on for --transport tls/tcp (and, remote to remote, SRC's host for DEST's agent to dial), e.g. 50000-50100 (default: any)")
		fs.StringVar(&c.DataAddr, "data-addr", c.DataAddr, "the remote host's `address` the agent listens on for --transport tls/tcp, and the streams go to (default: the address SSH reached it on; 0.0.0.0 or :: for all, the streams to the host's name)")
		fs.StringVarP(&c.SSH.Rsh, "rsh", "e", c.SSH.Rsh, "run the remote commands with `COMMAND` (the system's OpenSSH, as rsync's -e: \"ssh -F CONFIG\"), one process per stream, in place of the built-in SSH client: for what only OpenSSH does (Kerberos, FIDO or PKCS#11 keys, a ProxyCommand, a ControlMaster); a passphrase is asked once")
		fs.IntVar(&c.SSH.Port, "port", c.SSH.Port, "SSH `port` of the remote host (default: the SSH config's, else 22)")
		fs.Var(&c.SSH.Identities, "identity", "SSH identity `file` (repeatable)")
		fs.StringVar(&c.SSH.Config, "ssh-config", c.SSH.Config, "SSH config `file` instead of ~/.ssh/config (ssh -F)")
		fs.StringVarP(&c.SSH.Jump, "jump", "J", c.SSH.Jump, "jump through `[user@]host[:port][,...]` (overrides ProxyJump)")
		fs.BoolVar(&c.SSH.AcceptNew, "accept-new-host-key", c.SSH.AcceptNew, "record the host key of a host not yet in known_hosts (a changed key is always refused)")
		fs.BoolVar(&c.SSH.PasswordAuth, "password-auth", c.SSH.PasswordAuth, "allow password authentication, asked on the terminal")
		fs.DurationVar(&c.SSH.Linger, "linger", c.SSH.Linger, "keep the remote agent `duration` after the job, so that the next push to the host starts at once, without a login shell (a later push without --linger uses it and ends it)")
		fs.BoolVar(&c.SSH.ForwardAgent, "forward-agent", c.SSH.ForwardAgent, "remote to remote: let SRC's host log in to DEST's with this host's SSH agent, if it pushes over SSH (as ssh -A)")
		fs.StringVar(&c.SSH.RemoteBulkmove, "remote-bulkmove", c.SSH.RemoteBulkmove, "`path` of bulkmove on the remote host (default: bulkmove on its PATH, else upload this binary)")
		fs.BoolVar(&c.ViaAgent, "via-agent", c.ViaAgent, "run K local `bulkmove --agent` processes and talk the wire protocol to them (the SSH path, without SSH)")
		fs.StringVar(&c.Serve.TokenFile, "token-file", c.Serve.TokenFile, "bulkmove://: present the token in `FILE` to the server")
		fs.StringVar(&c.Serve.Fingerprint, "fingerprint", c.Serve.Fingerprint, "bulkmove://: the server certificate's `SHA-256` (as bulkmove serve prints it)")
		fs.StringVar(&c.Serve.CA, "ca", c.Serve.CA, "bulkmove://: verify the server's certificate with the CA in `file` instead")
		fs.StringVar(&c.Serve.Cert, "tls-cert", c.Serve.Cert, "bulkmove://: client certificate `file` for mutual TLS")
		fs.StringVar(&c.Serve.Key, "tls-key", c.Serve.Key, "bulkmove://: client key `file` for mutual TLS")
	})
	section(fs, "performance", func() {
		fs.IntVar(&c.Auto.Max, "max-streams", c.Auto.Max, "with -j auto: streams at most")
		fs.Var(&c.BatchSize, "batch-size", "close a batch at this cost: bytes plus a per-file overhead (e.g. 64MiB)")
		fs.IntVar(&c.BatchFiles, "batch-files", c.BatchFiles, "close a batch at this many files")
		fs.Var(&c.IOConcurrency, "io-concurrency", "file operations at once on each side, independent of -j: `N`, or auto (from the filesystems' measured latency: 1 on a local disk, up to 64 on NFS)")
		registerNice(fs, &c.Gentle.NiceFlags)
	})
	section(fs, "output", func() {
		fs.BoolVar(&c.JSON, "json", c.JSON, "write newline-delimited JSON events on stdout (start, progress, warning, error, bottleneck, streams, item with -i, end; see docs/observability.md)")
	})
}

// registerRsyncImplied registers rsync's flags for what bulkmove always
// does, so that the command lines rsync users type run as they expect.
// They change nothing.
func registerRsyncImplied(fs *pflag.FlagSet) {
	for _, f := range []struct{ name, short, usage string }{
		{"archive", "a", "rsync's -a (-rlptgoD): implied, bulkmove always keeps all of it but devices and special files, which it skips unless -D is given"},
		{"recursive", "r", "implied: directories are always moved whole"},
		{"links", "l", "implied: symlinks are always copied as symlinks"},
		{"times", "t", "implied: mtimes are always kept (nanoseconds)"},
		{"perms", "p", "implied: permission bits are always kept"},
		{"owner", "o", "implied where the receiver runs as root (see --no-owner)"},
		{"group", "g", "implied where the receiver runs as root (see --no-owner)"},
		{"numeric-ids", "", "implied: owners travel as numbers, kept as they are unless mapped (see --no-numeric-ids, --usermap)"},
		{"hard-links", "H", "implied: hard links are always kept, across the whole tree"},
	} {
		fs.BoolP(f.name, f.short, false, f.usage)
		fs.SetAnnotation(f.name, annImplied, []string{"true"})
	}
}

// registerMove registers every flag of a move: registerCompare's, and
// what only a move does (--delete, the skip rules, limits, metrics,
// the journal, ...).
func registerMove(fs *pflag.FlagSet, c *engine.Config) {
	registerCompare(fs, c)
	section(fs, "common", func() {
		fs.BoolVarP(&c.DryRun, "dry-run", "n", c.DryRun, "dry run: print what would move and the batch plan, move nothing (with -i, the lines the move would print)")
		fs.BoolVarP(&c.Quiet, "quiet", "q", c.Quiet, "no progress display and no summary when all went well; warnings and errors still print")
		fs.VarPF(&c.Compress, "compress", "z", "compress the data of remote streams: auto (each stream compresses while its link is slower than compression and the data compresses), zstd[:LEVEL] (always; LEVEL 1-22; -z), none").NoOptDefVal = "zstd"
		fs.SetAnnotation("compress", annValue, []string{"auto|zstd[:LEVEL]|none"})
	})
	section(fs, "comparison", func() {
		fs.BoolVar(&c.NoQuickCheck, "no-quick-check", c.NoQuickCheck, "send every file, even those already at DEST with the same size and mtime")
		fs.BoolVarP(&c.Checksum, "checksum", "c", c.Checksum, "skip files at DEST with the same size and content (XXH3-128, hashed on both sides), whatever their mtime")
		fs.BoolVar(&c.SizeOnly, "size-only", c.SizeOnly, "skip files at DEST with the same size, whatever their mtime")
		fs.BoolVar(&c.IgnoreExisting, "ignore-existing", c.IgnoreExisting, "skip files (and symlinks) that exist at DEST, whatever their content")
		fs.BoolVarP(&c.Select.Update, "update", "u", c.Select.Update, "skip files that are newer at DEST (mtime), as rsync's -u: their data and attributes stay; one of the same mtime is sent if its size differs; one of another type is replaced")
		fs.BoolVar(&c.Select.Existing, "existing", c.Select.Existing, "create nothing at DEST (files, directories, links): only update what is there")
		fs.BoolVar(&c.Select.Existing, "ignore-non-existing", c.Select.Existing, "the same as --existing")
		fs.Var(&c.Select.MinSize, "min-size", "do not send regular files smaller than `SIZE` (rsync's: 1.5M, 10MB, 2G-1, bare bytes); they are not deleted at DEST either")
		fs.Var(&c.Select.MaxSize, "max-size", "do not send regular files larger than `SIZE` (as --min-size; 0: empty files only)")
		fs.BoolVar(&c.NoVerifyTransfer, "no-verify-transfer", c.NoVerifyTransfer, "do not check each file's XXH3-128 end to end (the receiver then installs what arrives)")
	})
	section(fs, "kept", func() {
		fs.BoolVarP(&c.Select.CopyLinks, "copy-links", "L", c.Select.CopyLinks, "copy what each symlink under SRC points to, a file or a directory, in its place (rsync's -L); one pointing nowhere is an error naming it")
		fs.BoolVar(&c.Select.CopyUnsafeLinks, "copy-unsafe-links", c.Select.CopyUnsafeLinks, "as -L for the symlinks that point outside SRC (absolute, or climbing above it with ..); the others stay symlinks")
		fs.BoolVar(&c.Select.SafeLinks, "safe-links", c.Select.SafeLinks, "leave out the symlinks that point outside SRC (absolute, or climbing above it with ..)")
	})
	section(fs, "deletion", func() {
		fs.BoolVar(&c.Delete, "delete", c.Delete, "delete from DEST what is not in SRC (after the transfer, and only if nothing failed; excluded paths are kept)")
		fs.BoolVar(&c.DeleteExcluded, "delete-excluded", c.DeleteExcluded, "with --delete, also delete excluded paths at DEST (implies --delete)")
		fs.BoolVar(&c.NoDeleteGuard, "no-delete-guard", c.NoDeleteGuard, "with --delete, delete even when SRC selected nothing or more than half of DEST's entries (at least 1000) would go")
		fs.Var(&c.MaxDelete, "max-delete", "with --delete, delete at most `N` entries; past them the job says how many more it left and exits 25")
		fs.BoolVar(&c.Select.IgnoreErrors, "ignore-errors", c.Select.IgnoreErrors, "with --delete, delete even when the transfer had errors, as rsync's (a SRC directory that cannot be listed still stops the deletion)")
		fs.BoolVar(&c.RemoveSourceFiles, "remove-source-files", c.RemoveSourceFiles, "remove from SRC each file (not directory) once DEST acknowledged it durable (implies --fsync) and its hash matched, if it did not change since it was read; files found up to date at DEST too")
		fs.BoolVar(&c.RemoveSourceDirs, "remove-source-dirs", c.RemoveSourceDirs, "with --remove-source-files, after a pass without errors remove SRC's directories left empty, deepest first (never SRC itself)")
		fs.BoolVarP(&c.Backup.On, "backup", "b", c.Backup.On, "move aside at DEST what a pass replaces or deletes, as rsync's -b: renamed to its name plus --suffix (~) beside it, or moved under --backup-dir")
		fs.StringVar(&c.Backup.Dir, "backup-dir", c.Backup.Dir, "move what is replaced or deleted to `DIR`/its path plus --suffix (implies --backup): relative, beneath DEST; absolute, on the receiving host (not through a symlink; not to serve); never deleted by --delete")
		fs.Var(&suffixFlag{&c.Backup.Suffix}, "suffix", "the `SUFFIX` of backups (default ~ without --backup-dir, none with it)")
		for _, f := range []struct {
			v    *bool
			name string
		}{{&c.DeleteWhen.During, "del"}, {&c.DeleteWhen.Before, "delete-before"}, {&c.DeleteWhen.During, "delete-during"}, {&c.DeleteWhen.Delay, "delete-delay"}, {&c.DeleteWhen.After, "delete-after"}} {
			fs.BoolVar(f.v, f.name, *f.v, "rsync's; --delete (bulkmove always deletes after the transfer)")
		}
	})
	section(fs, "performance", func() {
		fs.Var(&c.Gentle.BwLimit, "bwlimit", "limit the whole job to `RATE` bytes a second (50M, 1.5G, off; a bare number is KiB as in rsync), "+
			`shared by all streams, or a timetable "08:00,20M 19:00,off"; SIGUSR1 halves it, SIGUSR2 doubles it, PUT /bwlimit on --metrics-addr sets it`)
		fs.Var(&c.Gentle.MaxReadRate, "max-read-rate", "limit reading the source disk to `RATE` bytes a second, apart from --bwlimit (on the host that reads SRC)")
		fs.Var(&c.DeltaMin, "delta-min", "send a file of at least `SIZE` that DEST holds with another size or mtime as a block delta: DEST's copy is hashed in blocks and only the blocks that differ travel (see docs/delta.md)")
		fs.BoolVarP(&c.WholeFile, "whole-file", "W", c.WholeFile, "send every file whole, never as a block delta (rsync's)")
		fs.BoolVar(&c.NoWholeFile, "no-whole-file", c.NoWholeFile, "use the block delta for files of --delta-min or more (the default; rsync's)")
		fs.BoolVar(&c.InPlace, "inplace", c.InPlace, "patch a file that goes as a block delta where it is, not in a copy beside it: for a DEST without room for a second copy; the file keeps its inode, and an interrupted patch is finished by the next run (see docs/delta.md)")
		fs.Var(&c.Split, "split-size", "cut files larger than `SIZE` into ranges of SIZE that several streams carry, written into one preallocated temporary and renamed when all have landed; auto: the larger of 64MiB and --batch-size, and never with --inplace; 0 or off: never split")
	})
	section(fs, "output", func() {
		// -P is rsync's --partial --progress: bulkmove's journal already
		// resumes an interrupted job where it stopped.
		fs.VarPF(newChoice(&c.Progress, "auto", "streams", "none"), "progress", "P", "progress display on a terminal: auto (one line), streams (a line per stream too), none; --progress or -P alone: auto").NoOptDefVal = "auto"
		fs.BoolVarP(&c.Itemize, "itemize-changes", "i", c.Itemize, "a line on stdout for each entry changed, as rsync's -i: >f+++++++++ new, >f.st...... sent (size, mtime differed), .f...p..... mode set, cd+++++++++ dir made, *deleting (see docs/rsync.md); with -n, what a move would change; with --json, item events")
		fs.StringVar(&c.OutFormat, "out-format", c.OutFormat, "the line -i writes for each entry changed, in rsync's `FORMAT`: %n name, %L symlink target, %i item code, %o operation, %l length, %b bytes sent, %f full path, %M mtime, %B permissions, %U %G owner and group, %t time, %p pid, %% (width as in %-10n; see docs/rsync.md); implies -i, which is --out-format='%i %n%L'")
		fs.BoolVar(&c.Stats, "stats", c.Stats, "after the run, rsync's summary block on stdout: files, created, deleted, transferred, sizes, bytes sent and received, speedup (see docs/rsync.md); with --json, a stats object in the end event")
		fs.Var(newInfo(&c.Progress), "info", "rsync's --info: `FLAGS` progress2 or progress1 (--progress), progress0 (--progress=none); others are refused")
		fs.StringVar(&c.LogFile, "log-file", c.LogFile, "append a record of each pass to `FILE` (docs/cutover.md): the command line, a line per entry created, changed, deleted or failed (-i's codes), what stderr shows, the exit code")
		fs.Var(newChoice(&c.LogLevel, "info", "debug"), "log-level", "--log-file detail: info (what stderr shows) or debug (also the -v phases)")
		fs.StringVar(&c.LogFileFormat, "log-file-format", c.LogFileFormat, "write --log-file's line for each entry changed in `FORMAT` as --out-format's (default '%i %n%L', as rsync's)")
	})
	section(fs, "operations", func() {
		fs.StringVar(&c.Journal, "journal", c.Journal, "resume journal `PATH` (default: under ~/.local/state/bulkmove, keyed by SRC, DEST and options; none: no journal)")
		fs.IntVar(&c.Retries, "retries", c.Retries, "times a batch may be on a stream that fails before the job gives up")
		fs.DurationVar(&c.ReconnectTimeout, "reconnect-timeout", c.ReconnectTimeout, "how long a lost stream tries to reconnect (exponential backoff) before the job goes on without it; 0: never")
		fs.DurationVar(&c.StallTimeout, "stall-timeout", c.StallTimeout, "a stream that moves no byte for this long with work in flight is closed and reconnected")
		fs.BoolVar(&c.RequireSpace, "require-space", c.RequireSpace, "refuse to go on once the walk has found more to move than DEST has free (without it: a warning)")
		fs.DurationVar(&c.Grace, "grace", c.Grace, "on the first SIGINT or SIGTERM, how long the batches in flight may take to finish")
		fs.BoolVar(&c.Fsync, "fsync", c.Fsync, "make each batch durable (fsync files and directories) before it is acknowledged")
		fs.StringVar(&c.Obs.MetricsAddr, "metrics-addr", c.Obs.MetricsAddr, "export Prometheus metrics on `host:port`; without a host on loopback only (:0 picks a port and prints it; 0.0.0.0:PORT for all interfaces)")
		fs.StringVar(&c.Obs.ControlToken, "control-token", c.Obs.ControlToken, "allow PUT /bwlimit on the --metrics-addr listener to requests with \"Authorization: Bearer TOKEN\", the token in `FILE` (mode 0600 or 0640); off without")
		fs.StringVar(&c.Obs.Textfile, "metrics-textfile", c.Obs.Textfile, "write the metrics to `file` for node_exporter's textfile collector, atomically, at exit and every --metrics-textfile-interval")
		fs.DurationVar(&c.Obs.TextfileEvery, "metrics-textfile-interval", c.Obs.TextfileEvery, "how often --metrics-textfile is rewritten while the job runs")
		fs.StringVar(&c.Obs.Pushgateway, "pushgateway", c.Obs.Pushgateway, "push the final metrics to this Pushgateway `URL` at exit")
		fs.StringVar(&c.Obs.JobName, "job-name", c.Obs.JobName, "job label for --pushgateway")
	})
}

// registerNice registers the flags that lower a process's claim on the
// disks and the CPUs: a move's, passed on to the agent, and the agent's.
func registerNice(fs *pflag.FlagSet, n *throttle.NiceFlags) {
	fs.BoolVar(&n.IONice, "io-nice", false, "use the idle I/O class (ioprio_set, as ionice -c3) for reading the source and writing the destination, on both hosts")
	fs.Var(&n.Nice, "nice", "run at CPU nice value `N` (-20 to 19, as nice -n), on both hosts")
}

// registerAllow registers a receiver's --allow-* flags (serve, agent):
// what its senders may ask it to keep.
func registerAllow(fs *pflag.FlagSet, a *engine.AllowFlags) {
	fs.BoolVar(&a.Owner, "allow-owner", false, "let senders keep their files' numeric owners (where this process can chown: root or CAP_CHOWN)")
	fs.BoolVar(&a.Setid, "allow-setid", false, "let senders keep setuid/setgid bits (--keep-setid) and, with --allow-xattrs, file capabilities")
	fs.BoolVar(&a.Xattrs, "allow-xattrs", false, "let senders set extended attributes (-X): user.*, and as root trusted.* and security.*")
	fs.BoolVar(&a.ACLs, "allow-acls", false, "let senders set POSIX ACLs (-A)")
	fs.BoolVar(&a.Devices, "allow-devices", false, "let senders make character and block devices (-D; where this process can: root or CAP_MKNOD)")
}
