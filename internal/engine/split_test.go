package engine

import (
	"testing"

	"github.com/bulkmove/bulkmove/sharder"
)

// TestSplitFlag: --split-size auto is the larger of 64 MiB and the batch
// size; 0 is off; and files are never split with --checksum, -X or -A.
func TestSplitFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want int64
	}{
		{"default", func(*Config) {}, 64 << 20},
		{"--batch-size 256MiB", func(c *Config) { c.BatchSize = 256 << 20 }, 256 << 20},
		{"--split-size 16MiB", func(c *Config) { c.Split.Size = 16 << 20 }, 16 << 20},
		{"--split-size 0", func(c *Config) { c.Split.Size = 0 }, 0},
		{"--checksum", func(c *Config) { c.Checksum = true }, 0},
		{"-X --split-size 1GiB", func(c *Config) { c.Faithful.Xattrs, c.Split.Size = true, 1<<30 }, 0},
		{"-A", func(c *Config) { c.Faithful.ACLs = true }, 0},
	} {
		c := DefaultConfig()
		tc.set(&c)
		var o sharder.Options
		c.Split.apply(&o, &c)
		if o.SplitSize != tc.want {
			t.Errorf("%s: split size %d, want %d", tc.name, o.SplitSize, tc.want)
		}
	}
}
