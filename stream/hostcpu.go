package stream

import (
	"bytes"
	"os"
	"strconv"
)

// hostCPU is a snapshot of the host's CPU time, from /proc/stat: idle
// (with iowait) and all, in clock ticks.
type hostCPU struct{ idle, total uint64 }

// readHostCPU reads it; ok false where there is no /proc/stat.
func readHostCPU() (c hostCPU, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 6 || string(f[0]) != "cpu" {
		return c, false
	}
	for i, s := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return c, false
		}
		c.total += v
		if i == 3 || i == 4 {
			c.idle += v
		}
	}
	return c, true
}

// busySince says whether the host's CPUs were at least share busy since
// the snapshot prev.
func (c hostCPU) busySince(prev hostCPU, share float64) bool {
	if c.total <= prev.total {
		return false
	}
	idle := float64(c.idle-prev.idle) / float64(c.total-prev.total)
	return 1-idle >= share
}
