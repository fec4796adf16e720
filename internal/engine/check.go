package engine

import (
	"fmt"

	"github.com/bulkmove/bulkmove/wire"
)

// checkFlags are the ways to decide that a file at DEST is up to date,
// as rsync's: at most one may be given.
var checkFlags = []struct {
	name string
	mode string
	set  func(*Config) *bool
}{
	{"--checksum", wire.CheckSum, func(f *Config) *bool { return &f.Checksum }},
	{"--size-only", wire.CheckSize, func(f *Config) *bool { return &f.SizeOnly }},
	{"--ignore-existing", wire.CheckExisting, func(f *Config) *bool { return &f.IgnoreExisting }},
	{"--no-quick-check", wire.CheckNone, func(f *Config) *bool { return &f.NoQuickCheck }},
}

// checkMode is the receiver's check mode (wire.Check*) the flags ask for,
// or an error naming two flags that exclude each other.
func (f *Config) checkMode() (string, error) {
	mode, name := wire.CheckQuick, ""
	for _, c := range checkFlags {
		if !*c.set(f) {
			continue
		}
		if name != "" {
			return "", fmt.Errorf("%s and %s cannot be used together", name, c.name)
		}
		mode, name = c.mode, c.name
	}
	return mode, nil
}
