package engine

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bulkmove/bulkmove/internal/ionice"
	"github.com/bulkmove/bulkmove/internal/ratelimit"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
)

// Being gentle on a live system: how much of the link, the source disk
// and the machines a job may take (docs/gentle.md).

// gentleFlags are the flags of the main command that limit the job.
type gentleFlags struct {
	bwlimit     scheduleFlag // --bwlimit: the job's transfer rate, or a timetable of rates
	maxReadRate rateFlag     // --max-read-rate: reading the source disk, on the sending host
	NiceFlags
}

func (g *gentleFlags) register(fs *flag.FlagSet) {
	fs.Var(&g.bwlimit, "bwlimit", "limit the whole job to `RATE` bytes a second (50M, 1.5G, off; a bare number is KiB as in rsync), "+
		`shared by all streams, or a timetable "08:00,20M 19:00,off"; SIGUSR1 halves it, SIGUSR2 doubles it, PUT /bwlimit on --metrics-addr sets it`)
	fs.Var(&g.maxReadRate, "max-read-rate", "limit reading the source disk to `RATE` bytes a second, apart from --bwlimit (on the host that reads SRC)")
	g.NiceFlags.Register(fs)
}

// hubArgs are the flags for the sender of a pull (send-hub), which reads
// the source on the remote host. --bwlimit is not among them: a pull
// paces what this host receives.
func (g *gentleFlags) hubArgs() []string {
	args := g.NiceFlags.Args()
	if g.maxReadRate > 0 {
		args = append(args, "--max-read-rate", rateText(int64(g.maxReadRate)))
	}
	return args
}

// NiceFlags lower a process's claim on the disks and the CPUs: the sender
// takes them, and passes them on to the agent that receives.
type NiceFlags struct {
	ioNice bool      // --io-nice: the idle I/O class
	nice   niceValue // --nice N
}

func (n *NiceFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&n.ioNice, "io-nice", false, "use the idle I/O class (ioprio_set, as ionice -c3) for reading the source and writing the destination, on both hosts")
	fs.Var(&n.nice, "nice", "run at CPU nice value `N` (-20 to 19, as nice -n), on both hosts")
}

// apply sets them for this process: early, before the work starts, so
// that every thread runs with them. A failure (no ioprio_set here, or a
// lower nice value without the privilege) is a warning, as nice(1) does.
func (n *NiceFlags) Apply(stderr io.Writer) {
	if n.ioNice {
		if err := ionice.SetIdle(); err != nil {
			termsafe.Errorf(stderr, "warning: --io-nice: %v", err)
		}
	}
	if n.nice.set {
		if err := ionice.SetNice(n.nice.n); err != nil {
			termsafe.Errorf(stderr, "warning: --nice %d: %v", n.nice.n, err)
		}
	}
}

// args are the flags for the agent (or the sender of a pull), shell-safe.
func (n *NiceFlags) Args() []string {
	var args []string
	if n.ioNice {
		args = append(args, "--io-nice")
	}
	if n.nice.set {
		args = append(args, "--nice", strconv.Itoa(n.nice.n))
	}
	return args
}

// text is args as they follow a command on a shell command line
// (" --io-nice --nice 19"), or "".
func (n *NiceFlags) Text() string {
	var b strings.Builder
	for _, a := range n.Args() {
		b.WriteString(" " + a)
	}
	return b.String()
}

// niceValue is --nice N; unset, the nice value is left alone.
type niceValue struct {
	n   int
	set bool
}

func (v *niceValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return strconv.Itoa(v.n)
}

func (v *niceValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < -20 || n > 19 {
		return fmt.Errorf("nice value %q: want a whole number from -20 to 19", s)
	}
	v.n, v.set = n, true
	return nil
}

// rateFlag is a rate in bytes a second, read by units.ParseRate; 0: none.
type rateFlag int64

func (r *rateFlag) String() string {
	if r == nil || *r == 0 {
		return ""
	}
	return rateText(int64(*r))
}

func (r *rateFlag) Set(s string) error {
	v, err := units.ParseRate(s)
	*r = rateFlag(v)
	return err
}

// scheduleFlag is a rate or an rclone timetable of rates.
type scheduleFlag struct {
	text  string
	sched *ratelimit.Schedule // nil: no limit given
}

func (s *scheduleFlag) String() string {
	if s == nil {
		return ""
	}
	return s.text
}

func (s *scheduleFlag) Set(v string) error {
	sched, err := ratelimit.ParseSchedule(v)
	if err != nil {
		return err
	}
	s.text, s.sched = v, sched
	return nil
}

// rateText writes a rate so that units.ParseRate reads it back exactly:
// off, or as units.Exact writes it (50MiB, 12800KiB, 1000B).
func rateText(r int64) string {
	if r <= 0 {
		return "off"
	}
	return units.Exact(r)
}
