package send

import "github.com/bulkmove/bulkmove/internal/hostcpu"

// Every file body over a TCP stream without hashes goes by sendfile in
// this package's tests, whatever its size: the conformance matrix's
// "tcp-sendfile" transport then runs that path on every test tree.
func init() { sendfileMin = 1 }

// Flips is how many times the stream's --compress auto turned compression
// on or off, and changed its level.
func (c *Client) Flips() (onOff, levels int) {
	if c.z == nil {
		return 0, 0
	}
	return c.z.Flips()
}

// SetHostCPU replaces how the streams read this host's CPU time, until the
// test ends.
func SetHostCPU(t interface{ Cleanup(func()) }, read func() (hostcpu.Snapshot, bool)) {
	old := readHost
	readHost = read
	t.Cleanup(func() { readHost = old })
}
