package engine

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bulkmove/bulkmove/filter"
	"github.com/bulkmove/bulkmove/internal/engine/autojobs"
	"github.com/bulkmove/bulkmove/internal/engine/throttle"
	"github.com/bulkmove/bulkmove/internal/itemize"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/send/compress"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/transport/dataplane"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/wire"
)

// Config is every option that changes what a move (or verify) does or
// how: cmd/bulkmove's flags fill it, DefaultConfig gives its defaults,
// Check validates it in one place, and a pull sends it whole to the
// remote sender (sendconfig.go). Each field's flag is in its comment
// where the name does not say it.
// LogFile, LogLevel, Progress and Grace are read by cmd/bulkmove, which
// keeps the log, draws the progress display and handles the signals.
type Config struct {
	Jobs             int
	BatchSize        ByteSize
	BatchFiles       int
	Rules            *filter.Rules `json:"-"` // --exclude, --include, --exclude-from, --include-from, --filter
	CVSExclude       bool          `json:"-"` // -C: FinishRules adds rsync's CVS excludes after the other rules
	DryRun           bool
	Delete           bool
	DeleteExcluded   bool
	NoDeleteGuard    bool
	MaxDelete        Count // --max-delete
	Journal          string
	Retries          int
	OneFS            bool
	LogFile          string
	LogLevel         string
	NoVerifyTransfer bool
	Compress         Compress
	ReconnectTimeout time.Duration
	StallTimeout     time.Duration
	Grace            time.Duration
	Serve            ServeClient
	Transport        string
	DataPorts        string
	DataAddr         string
	RequireSpace     bool
	IOConcurrency    IOConcurrency // --io-concurrency: see ioconc.go
	Verbose          bool
	Fsync            bool
	KeepSetid        bool
	NoOwner          bool
	NoQuickCheck     bool
	Checksum         bool // --checksum, --size-only, --ignore-existing: see check.go
	SizeOnly         bool
	IgnoreExisting   bool
	ViaAgent         bool
	JSON             bool
	Quiet            bool   // -q: no summary when all went well (cmd/bulkmove also draws no progress)
	Itemize          bool   // -i: a line on stdout for each entry changed (internal/itemize); --out-format sets it
	OutFormat        string // --out-format: how those lines read (itemize.Format; "": -i's)
	LogFileFormat    string // --log-file-format: a line in --log-file for each entry changed, so written
	Stats            bool   // --stats: rsync's summary block on stdout (stats.go)
	Human            int    // -h: rsync's --human-readable level (-h 1, -hh 2): --stats in units
	Progress         string
	Obs              Observe
	Gentle           throttle.Gentle // --bwlimit, --max-read-rate, --io-nice, --nice: package throttle
	SSH              SSHConfig
	Scale            Scale
	Faithful         Faithful  // -X, -A, --sparse: see faithful.go
	Owners           Owners    // --usermap, --groupmap, --chown, --chmod: see owners.go
	Auto             AutoJobs  // -j auto, --max-streams: see autoj.go
	Split            SplitSize // --split-size: see split.go
	// DeltaMin (--delta-min): files of at least this many bytes that
	// DEST holds with another size or mtime go as a block delta over a
	// stream (wire/delta.go), unless WholeFile (--whole-file, -W;
	// --no-whole-file clears it).
	DeltaMin    ByteSize
	WholeFile   bool
	NoWholeFile bool
	// InPlace (--inplace): a file that goes as a block delta is patched
	// where it is at DEST, not built in a copy of the old version.
	InPlace bool
	Select  Select // --min-size, --max-size, --ignore-errors, ...: see selections.go

	// --remove-source-files and --remove-source-dirs: see removesrc.go.
	RemoveSourceFiles bool
	RemoveSourceDirs  bool

	// --backup, --backup-dir, --suffix, and rsync's --delete-WHEN: see
	// backup.go.
	Backup     Backup
	DeleteWhen DeleteWhen
}

// ByteSize is a flag of a size with an optional unit: 64MiB, 64m, 1G, 4096.
type ByteSize int64

// String writes the size as the flag reads it back, in the largest unit
// that divides it (16MiB): the help's defaults read as people type them.
func (b *ByteSize) String() string { return units.Exact(int64(*b)) }

// Type names the value in help (the flag parser asks).
func (b *ByteSize) Type() string { return "size" }

func (b *ByteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = ByteSize(n)
	return nil
}

// Count is a count of 0 or more that may be left unset.
type Count struct {
	n   int64
	set bool
}

func (c *Count) String() string {
	if !c.set {
		return ""
	}
	return strconv.FormatInt(c.n, 10)
}

// MarshalText and UnmarshalText carry a Count in a Config sent to a
// pull's sender: "" is unset.
func (c Count) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

func (c *Count) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = Count{}
		return nil
	}
	return c.Set(string(b))
}

func (c *Count) Type() string { return "N" }

func (c *Count) Set(s string) error {
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

type StringList []string

func (l *StringList) String() string { return strings.Join(*l, ",") }

func (l *StringList) Set(s string) error { *l = append(*l, s); return nil }

func (l *StringList) Type() string { return "string" }

// DefaultConfig is the Config of a move given no option: what the flags
// default to.
func DefaultConfig() Config {
	c := Config{
		Jobs:             autojobs.Start,
		Auto:             AutoJobs{On: true, Max: autojobs.MaxStreams},
		BatchSize:        ByteSize(sharder.DefaultBatchBytes),
		BatchFiles:       sharder.DefaultBatchFiles,
		Rules:            new(filter.Rules),
		LogLevel:         "info",
		Retries:          5,
		ReconnectTimeout: 5 * time.Minute,
		StallTimeout:     60 * time.Second,
		Grace:            10 * time.Second,
		Transport:        "ssh",
		Progress:         "auto",
		Faithful:         Faithful{Sparse: true},
		Owners:           Owners{Umask: processUmask},
		Split:            SplitSize{Size: -1},
		DeltaMin:         64 << 20,
		Obs:              Observe{TextfileEvery: 15 * time.Second, JobName: "bulkmove", VerdictInterval: time.Second},
	}
	c.Compress.Mode = compress.Auto
	return c
}

// Check validates c, the one place that does, naming the option at fault
// as its flag; it also settles what one option implies of another
// (--delete-excluded is --delete too) and reads --control-token's file.
func (c *Config) Check() error {
	if c.DeleteExcluded {
		c.Delete = true
	}
	if c.NoWholeFile {
		c.WholeFile = false
	}
	if c.DeltaMin < 0 {
		return fmt.Errorf("--delta-min: %d is not a size", c.DeltaMin)
	}
	if err := c.DeleteWhen.check(c); err != nil {
		return err
	}
	if err := c.Backup.check(); err != nil {
		return err
	}
	if _, err := c.checkMode(); err != nil {
		return err
	}
	if err := c.Scale.check(c); err != nil {
		return err
	}
	if (c.MaxDelete.set || c.NoDeleteGuard) && !c.Delete {
		return errors.New("--max-delete and --no-delete-guard go with --delete")
	}
	if err := c.checkRemoveSource(); err != nil {
		return err
	}
	if err := c.Owners.check(c.NoOwner); err != nil {
		return err
	}
	if (c.Faithful.FakeSuper || c.Faithful.RemoteFakeSuper) && c.Faithful.ACLs {
		return errors.New("-A with --fake-super: ACLs are not kept in user.rsync.%aacl (rsync's format for them there is not supported); leave out -A")
	}
	if err := c.checkCounts(); err != nil {
		return err
	}
	if err := c.checkFormats(); err != nil {
		return err
	}
	if err := c.Obs.check(); err != nil {
		return err
	}
	switch c.Transport {
	case "ssh", "tls", "tcp", "auto":
	default:
		return fmt.Errorf("--transport %q: want ssh, tls, tcp or auto", c.Transport)
	}
	if _, _, err := dataplane.ParsePorts(c.DataPorts); err != nil {
		return fmt.Errorf("--data-ports: %w", err)
	}
	if c.DataAddr != "" && net.ParseIP(strings.Trim(c.DataAddr, "[]")) == nil {
		return fmt.Errorf("--data-addr %q: want an IP address of the remote host (0.0.0.0 or :: for all)", c.DataAddr)
	}
	if c.SSH.Rsh != "" {
		if _, err := sshx.RshCommand(c.SSH.Rsh); err != nil {
			return err
		}
	}
	return nil
}

// checkFormats reads --out-format and --log-file-format; --out-format
// is -i written another way (rsync's -i is --out-format='%i %n%L').
func (c *Config) checkFormats() error {
	if c.OutFormat != "" {
		if _, err := itemize.ParseFormat(c.OutFormat); err != nil {
			return fmt.Errorf("--out-format %w", err)
		}
		c.Itemize = true
	}
	if c.LogFileFormat != "" {
		if _, err := itemize.ParseFormat(c.LogFileFormat); err != nil {
			return fmt.Errorf("--log-file-format %w", err)
		}
		if c.LogFile == "" {
			return errors.New("--log-file-format goes with --log-file")
		}
	}
	return nil
}

// formats are the job's --out-format (nil without -i) and the format of
// --log-file's item lines (nil without --log-file): --log-file-format,
// by default rsync's '%i %n%L'.
func (c *Config) formats(logging bool) (out, log *itemize.Format) {
	if c.Itemize {
		f := c.OutFormat
		if f == "" {
			f = itemize.Default
		}
		out, _ = itemize.ParseFormat(f)
	}
	if logging { // --log-file here, or the control host's (R2RSender)
		f := c.LogFileFormat
		if f == "" {
			f = itemize.Default
		}
		log, _ = itemize.ParseFormat(f)
	}
	return out, log
}

// checkCounts refuses a count, or a duration, outside its range, naming
// the flag and the range. --io-concurrency and --nice check theirs as
// they are parsed.
func (c *Config) checkCounts() error {
	for _, n := range []struct {
		flag   string
		v      int
		lo, hi int
		unit   string
	}{
		{"-j", c.Jobs, 1, 256, " streams"},
		{"--max-streams", c.Auto.Max, 1, 256, " streams"},
		{"--batch-files", c.BatchFiles, 1, wire.MaxEntries, " files"},
		{"--retries", c.Retries, 1, 1000, ""},
		{"--port", c.SSH.Port, 0, 65535, " (0: the SSH config's, else 22)"},
	} {
		if n.v < n.lo || n.v > n.hi {
			return fmt.Errorf("%s %d: want %d to %d%s", n.flag, n.v, n.lo, n.hi, n.unit)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"reconnect-timeout", c.ReconnectTimeout}, {"stall-timeout", c.StallTimeout}, {"grace", c.Grace},
		{"linger", c.SSH.Linger}, {"metrics-textfile-interval", c.Obs.TextfileEvery},
	} {
		if d.v < 0 {
			return fmt.Errorf("--%s %s: want a duration of 0 or more", d.flag, d.v)
		}
	}
	return nil
}
