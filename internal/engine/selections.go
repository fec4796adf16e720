package engine

import (
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/send/source"
	"github.com/bulkmove/bulkmove/sharder"
	"github.com/bulkmove/bulkmove/wire"
)

// Select is what a move leaves out beyond the filter rules, as rsync's
// transfer rules: what is left out is neither sent nor, with --delete,
// deleted at DEST (it is still in SRC).
type Select struct {
	// MinSize and MaxSize (--min-size, --max-size): regular files smaller
	// or larger are not sent.
	MinSize, MaxSize SizeLimit
	// Update (-u): a file newer at DEST is left as it is. Existing
	// (--existing, --ignore-non-existing): nothing new is made at DEST,
	// what is there is updated. The receiver decides both, from what DEST
	// holds (wire.ReceiveOptions).
	Update, Existing bool
	// CopyLinks (-L), CopyUnsafeLinks (--copy-unsafe-links) and
	// SafeLinks (--safe-links): symlinks under SRC followed, or left
	// out (sharder.Links).
	CopyLinks, CopyUnsafeLinks, SafeLinks bool
	// IgnoreErrors (--ignore-errors): --delete deletes even after errors.
	IgnoreErrors bool
}

// SizeLimit is --min-size or --max-size: a size as rsync reads one
// (units.ParseSize: 1.5M, 10MB, 2G-1, bare bytes), 0 included; unset, no
// limit.
type SizeLimit struct {
	N  int64
	On bool
}

func (s *SizeLimit) String() string {
	if s == nil || !s.On {
		return ""
	}
	return units.Exact(s.N)
}

func (s *SizeLimit) Type() string { return "SIZE" }

func (s *SizeLimit) Set(v string) error {
	n, err := units.ParseSize(v, units.BareBytes)
	if err != nil {
		return err
	}
	s.N, s.On = n, true
	return nil
}

// receive tells the receiver what to leave alone.
func (s *Select) receive(o *wire.ReceiveOptions) {
	o.Update, o.Existing = s.Update, s.Existing
}

// keepsFound says whether a file the receiver did not send may be other
// than SRC's (-u: newer at DEST; --existing: not made), so that
// --remove-source-files removes only the files sent.
func (s *Select) keepsFound() bool { return s.Update || s.Existing }

// links is what the walk makes of symlinks.
func (s *Select) links() sharder.Links {
	return sharder.Links{Copy: s.CopyLinks, CopyUnsafe: s.CopyUnsafeLinks, Safe: s.SafeLinks}
}

// source tells the sender to open a file through the symlink the walk
// followed to it.
func (s *Select) source(src *source.Source) { src.FollowLinks = s.links().Any() }

// walk tells the walk which regular files to leave out, and what to make
// of symlinks.
func (s *Select) walk(o *sharder.Options) {
	o.Links = s.links()
	if s.MinSize.On {
		o.MinSize = s.MinSize.N
	}
	if s.MaxSize.On {
		o.MaxSize, o.HasMaxSize = s.MaxSize.N, true
	}
}
