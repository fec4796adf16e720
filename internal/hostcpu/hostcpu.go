// Package hostcpu reads how busy the host's CPUs are, from /proc/stat:
// for decisions that more work in parallel cannot help when the CPUs are
// already busy, whoever keeps them so.
package hostcpu

import (
	"bytes"
	"os"
	"strconv"
)

// Busy is the share of the host's CPUs beyond which more parallel work
// (another stream, compressing) would only take CPU from what runs: where
// both ends share the host's cores, the far end's sshd.
const Busy = 0.85

// Snapshot is the host's CPU time at one moment: idle (with iowait) and
// all, in clock ticks.
type Snapshot struct{ Idle, Total uint64 }

// Read takes a snapshot; ok false where there is no /proc/stat.
func Read() (s Snapshot, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 6 || string(f[0]) != "cpu" {
		return s, false
	}
	for i, v := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return s, false
		}
		s.Total += n
		if i == 3 || i == 4 {
			s.Idle += n
		}
	}
	return s, true
}

// BusySince says whether the host's CPUs were at least share busy
// between prev and s (false if prev is the zero Snapshot or no time
// passed).
func (s Snapshot) BusySince(prev Snapshot, share float64) bool {
	if prev.Total == 0 || s.Total <= prev.Total {
		return false
	}
	idle := float64(s.Idle-prev.Idle) / float64(s.Total-prev.Total)
	return 1-idle >= share
}
