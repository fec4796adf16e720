package main

import (
	"fmt"

	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/stream"
)

// compressFlag is --compress: none, auto (the default) or zstd[:LEVEL].
type compressFlag struct{ stream.Compression }

func (c *compressFlag) String() string { return c.Compression.String() }

func (c *compressFlag) Set(s string) error {
	v, err := stream.ParseCompression(s)
	if err != nil {
		return err
	}
	c.Compression = v
	return nil
}

// configure applies the stream options of the command line to a client.
func (j *job) configure(c *stream.Client) {
	c.StallTimeout = j.flags.stallTimeout
	c.NoIntegrity = j.flags.noVerifyTransfer
	c.Compress = j.flags.compress.Compression
	c.Logf = j.trace
}

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
	return fmt.Sprintf("; compressed %s to %s (%.0f%%)", humanBytes(in), humanBytes(out), 100*float64(out)/float64(in))
}
