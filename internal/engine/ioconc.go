package engine

import (
	"fmt"
	"strconv"

	"github.com/bulkmove/bulkmove/internal/ioconc"
)

// IOConcurrency is --io-concurrency: how many filesystem operations (readdir
// and lstat in the walk; open and read of source files; create, write,
// chmod, utimes and rename at the receiver) run at once on each side,
// independently of -j, the number of network streams. auto (0) chooses
// from each filesystem's measured latency: one at a time on a local disk or
// a tmpfs, up to 64 on NFS, Lustre or GPFS, where every operation is a
// round trip to a server.
type IOConcurrency int

func (f *IOConcurrency) String() string {
	if *f == 0 {
		return "auto"
	}
	return strconv.Itoa(int(*f))
}

func (f *IOConcurrency) Type() string { return "N" }

func (f *IOConcurrency) Set(s string) error {
	if s == "auto" {
		*f = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 4096 {
		return fmt.Errorf("want auto or a number from 1 to 4096")
	}
	*f = IOConcurrency(n)
	return nil
}

// gauge is the sender's: it measures the source filesystem.
func (f IOConcurrency) gauge() *ioconc.Gauge {
	if f > 0 {
		return ioconc.Fixed(int(f))
	}
	return ioconc.Auto(0)
}
