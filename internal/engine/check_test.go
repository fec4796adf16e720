package engine

import (
	"testing"

	"github.com/bulkmove/bulkmove/wire"
)

// The check options map to the receiver's modes.
func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Config)
		mode string
	}{
		{"default", func(*Config) {}, wire.CheckQuick},
		{"--checksum", func(c *Config) { c.Checksum = true }, wire.CheckSum},
		{"--size-only", func(c *Config) { c.SizeOnly = true }, wire.CheckSize},
		{"--ignore-existing", func(c *Config) { c.IgnoreExisting = true }, wire.CheckExisting},
		{"--no-quick-check", func(c *Config) { c.NoQuickCheck = true }, wire.CheckNone},
	} {
		j := &job{flags: DefaultConfig()}
		c.set(&j.flags)
		if got := j.receiveOptions().Check; got != c.mode {
			t.Errorf("%s: check %q, want %q", c.name, got, c.mode)
		}
	}
}
