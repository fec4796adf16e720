package engine

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/bulkmove/bulkmove/internal/idmap"
	"github.com/bulkmove/bulkmove/internal/unixmode"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/wire"
)

// Owners are rsync's ownership and mode options: --usermap, --groupmap
// and --chown (one of each), --numeric-ids and --no-numeric-ids, --chmod.
// The receiver applies them (package extract, translate.go); the sender
// checks their syntax, and sends its names of the owners where a rule
// matches names or owners go by name.
type Owners struct {
	UserMap  string `json:",omitempty"`
	GroupMap string `json:",omitempty"`
	// ViaChown: the maps are --chown's, which a later --chown replaces
	// and a --usermap or --groupmap conflicts with, as in rsync.
	UserViaChown  bool `json:",omitempty"`
	GroupViaChown bool `json:",omitempty"`
	// ByName (--no-numeric-ids): an owner no rule maps takes the
	// receiver's id of the sender's name for it (rsync's default).
	ByName bool     `json:",omitempty"`
	Chmod  []string `json:",omitempty"`
	// Umask masks the --chmod clauses that name no class: this process's
	// (cmd/bulkmove sets it), which a pull's remote sender takes along.
	Umask uint32
}

// processUmask is this process's umask, read once at start (setting it
// is the only way to read it).
var processUmask = func() uint32 { old := syscall.Umask(0); syscall.Umask(old); return uint32(old) }()

// SetUserMap is --usermap.
func (o *Owners) SetUserMap(s string) error {
	return o.setMap("--usermap", s, &o.UserMap, &o.UserViaChown)
}

// SetGroupMap is --groupmap.
func (o *Owners) SetGroupMap(s string) error {
	return o.setMap("--groupmap", s, &o.GroupMap, &o.GroupViaChown)
}

func (o *Owners) setMap(flag, s string, dst *string, viaChown *bool) error {
	if *dst != "" {
		if *viaChown {
			return fmt.Errorf("%s conflicts with an earlier --chown", flag)
		}
		return fmt.Errorf("%s may be given once (list its rules with commas)", flag)
	}
	if _, err := idmap.Parse(flag, s); err != nil {
		return err
	}
	*dst = s
	return nil
}

// SetChown is --chown USER:GROUP, --usermap=*:USER --groupmap=*:GROUP.
func (o *Owners) SetChown(s string) error {
	user, group := idmap.Chown(s)
	for _, m := range []struct {
		spec     string
		dst      *string
		viaChown *bool
		flag     string
	}{{user, &o.UserMap, &o.UserViaChown, "--usermap"}, {group, &o.GroupMap, &o.GroupViaChown, "--groupmap"}} {
		if m.spec == "" {
			continue
		}
		if *m.dst != "" && !*m.viaChown {
			return fmt.Errorf("--chown conflicts with an earlier %s", m.flag)
		}
		if _, err := idmap.Parse("--chown", m.spec); err != nil {
			return fmt.Errorf("--chown %q: %w", s, errors.Unwrap(err))
		}
		*m.dst, *m.viaChown = m.spec, true
	}
	return nil
}

// AddChmod is --chmod (repeatable: each adds its clauses after the last).
func (o *Owners) AddChmod(s string) error {
	if _, err := unixmode.ParseChmod(s, o.Umask); err != nil {
		return err
	}
	o.Chmod = append(o.Chmod, s)
	return nil
}

// check refuses maps where owners are not kept.
func (o *Owners) check(noOwner bool) error {
	if noOwner && (o.UserMap != "" || o.GroupMap != "" || o.ByName) {
		return errors.New("--usermap, --groupmap, --chown and --no-numeric-ids map the owners --no-owner does not keep")
	}
	return nil
}

// names reports whether the sender's names of owners must travel.
func (o *Owners) names() bool {
	if o.ByName {
		return true
	}
	for _, s := range []struct{ flag, spec string }{{"--usermap", o.UserMap}, {"--groupmap", o.GroupMap}} {
		if s.spec == "" {
			continue
		}
		if m, err := idmap.Parse(s.flag, s.spec); err == nil && m.NeedsNames() {
			return true
		}
	}
	return false
}

// receive tells the receiver how to map owners and change modes.
func (o *Owners) receive(r *wire.ReceiveOptions) {
	r.UserMap, r.GroupMap, r.ByName, r.Names = o.UserMap, o.GroupMap, o.ByName, o.names()
	r.Chmod, r.ChmodUmask = strings.Join(o.Chmod, ","), o.Umask
}

// source gives the sender its name service where its names travel.
func (o *Owners) source(s *source.Source) {
	if o.names() {
		s.Owners = idmap.NewNames()
	}
}
