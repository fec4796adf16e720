//go:build unix && !linux

package agentbin

import "syscall"

// ctimeOf is 0 where Stat_t names it differently: the other fields still
// change when the file is replaced or rewritten.
func ctimeOf(*syscall.Stat_t) int64 { return 0 }
