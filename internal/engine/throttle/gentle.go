package throttle

import (
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

// Gentle are the flags of the main command that limit the job.
type Gentle struct {
	BwLimit     Schedule // --bwlimit: the job's transfer rate, or a timetable of rates
	MaxReadRate Rate     // --max-read-rate: reading the source disk, on the sending host
	NiceFlags
}

// NiceFlags lower a process's claim on the disks and the CPUs: the sender
// takes them, and passes them on to the agent that receives.
type NiceFlags struct {
	IONice bool      `json:"io_nice,omitempty"` // --io-nice: the idle I/O class
	Nice   NiceValue `json:"nice"`              // --nice N
}

// Apply sets them for this process: early, before the work starts, so
// that every thread runs with them. A failure (no ioprio_set here, or a
// lower nice value without the privilege) is a warning, as nice(1) does.
func (n *NiceFlags) Apply(stderr io.Writer) {
	if n.IONice {
		if err := ionice.SetIdle(); err != nil {
			termsafe.Errorf(stderr, "warning: --io-nice: %v", err)
		}
	}
	if n.Nice.Given {
		if err := ionice.SetNice(n.Nice.N); err != nil {
			termsafe.Errorf(stderr, "warning: --nice %d: %v", n.Nice.N, err)
		}
	}
}

// Args are the flags for the agent (or the sender of a pull), shell-safe.
func (n *NiceFlags) Args() []string {
	var args []string
	if n.IONice {
		args = append(args, "--io-nice")
	}
	if n.Nice.Given {
		args = append(args, "--nice", strconv.Itoa(n.Nice.N))
	}
	return args
}

// Text is Args as they follow a command on a shell command line
// (" --io-nice --nice 19"), or "".
func (n *NiceFlags) Text() string {
	var b strings.Builder
	for _, a := range n.Args() {
		b.WriteString(" " + a)
	}
	return b.String()
}

// NiceValue is --nice N; unset, the nice value is left alone.
type NiceValue struct {
	N     int  `json:"n"`
	Given bool `json:"given,omitempty"`
}

func (v *NiceValue) String() string {
	if v == nil || !v.Given {
		return ""
	}
	return strconv.Itoa(v.N)
}

func (v *NiceValue) Type() string { return "N" }

func (v *NiceValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < -20 || n > 19 {
		return fmt.Errorf("nice value %q: want a whole number from -20 to 19", s)
	}
	v.N, v.Given = n, true
	return nil
}

// Rate is a rate in bytes a second, read by units.ParseRate; 0: none.
type Rate int64

func (r *Rate) String() string {
	if r == nil || *r == 0 {
		return ""
	}
	return rateText(int64(*r))
}

func (r *Rate) Type() string { return "rate" }

func (r *Rate) Set(s string) error {
	v, err := units.ParseRate(s)
	*r = Rate(v)
	return err
}

// Schedule is a rate or an rclone timetable of rates.
type Schedule struct {
	text  string
	sched *ratelimit.Schedule // nil: no limit given
}

func (s *Schedule) String() string {
	if s == nil {
		return ""
	}
	return s.text
}

func (s *Schedule) Type() string { return "rate" }

func (s *Schedule) Set(v string) error {
	sched, err := ratelimit.ParseSchedule(v)
	if err != nil {
		return err
	}
	s.text, s.sched = v, sched
	return nil
}

// MarshalText is the schedule as --bwlimit gave it ("" for none): a
// remote-to-remote move's box1 gets it in its sender's --config, and
// applies it.
func (s Schedule) MarshalText() ([]byte, error) { return []byte(s.text), nil }

// UnmarshalText reads MarshalText's ("": no limit).
func (s *Schedule) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = Schedule{}
		return nil
	}
	return s.Set(string(b))
}

// rateText writes a rate so that units.ParseRate reads it back exactly:
// off, or as units.Exact writes it (50MiB, 12800KiB, 1000B).
func rateText(r int64) string {
	if r <= 0 {
		return "off"
	}
	return units.Exact(r)
}
