package engine

import (
	"fmt"

	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/send"
	"github.com/bulkmove/bulkmove/send/compress"
)

// Compress is --compress: none, auto (the default) or zstd[:LEVEL].
type Compress struct{ compress.Config }

func (c *Compress) String() string { return c.Config.String() }

func (c *Compress) Type() string { return "string" }

func (c *Compress) Set(s string) error {
	v, err := compress.Parse(s)
	if err != nil {
		return err
	}
	c.Config = v
	return nil
}

// configure applies the stream options of the command line to a client.
func (j *job) configure(c *send.Client) {
	c.StallTimeout = j.flags.StallTimeout
	c.Compress = j.flags.Compress.Config
	c.Share = &j.share
	c.Logf = j.trace
}

// openingCost bounds the first batches of remote streams under --compress
// auto (send.Pool.Opening): with SSH's 2 MiB channel window, or a
// socket's buffer, full, a 4 MiB batch's writes wait most of its time on
// a slow link, which is what turns compression on.
const openingCost = 4 << 20

// compression describes what compression did, for the summary line
// ("" if nothing went compressed).
func compression(m *metrics.Job) string {
	if m == nil {
		return ""
	}
	in, out := m.Compressed()
	if in == 0 {
		return ""
	}
	return fmt.Sprintf("; compressed %s to %s (%.0f%%)", units.Size(in), units.Size(out), 100*float64(out)/float64(in))
}

// isClient reports whether c is a remote stream (the only kind that
// compresses).
func isClient(c send.Conn) bool {
	_, ok := c.(*send.Client)
	return ok
}
