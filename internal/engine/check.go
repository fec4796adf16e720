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
	set  func(*moveFlags) *bool
}{
	{"--checksum", wire.CheckSum, func(f *moveFlags) *bool { return &f.checksum }},
	{"--size-only", wire.CheckSize, func(f *moveFlags) *bool { return &f.sizeOnly }},
	{"--ignore-existing", wire.CheckExisting, func(f *moveFlags) *bool { return &f.ignoreExisting }},
	{"--no-quick-check", wire.CheckNone, func(f *moveFlags) *bool { return &f.noCheck }},
}

// checkMode is the receiver's check mode (wire.Check*) the flags ask for,
// or an error naming two flags that exclude each other.
func (f *moveFlags) checkMode() (string, error) {
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

// checkArgs are the flags that give f's check mode, for a send-hub.
func (f *moveFlags) checkArgs() []string {
	var args []string
	for _, c := range checkFlags {
		if *c.set(f) {
			args = append(args, c.name)
		}
	}
	return args
}
