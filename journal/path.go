package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultPath returns where the journal of a job lives when --journal does
// not say: $XDG_STATE_HOME/bulkmove/journal/KEY.journal, the state home
// being ~/.local/state when XDG_STATE_HOME is unset or not absolute. KEY is
// a hash of the absolute form of src, of dst as given, and of opts: the
// options that change what is moved (exclusions, say), each a self-contained
// string such as "exclude=*.o", in a fixed order. The caller passes dst (and
// a remote src) in a canonical form, since a relative local path means
// another place from another directory; src is made absolute here with
// filepath.Abs, which is only right for a local src.
func DefaultPath(src, dst string, opts ...string) (string, error) {
	state, err := StateDir()
	if err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", fmt.Errorf("journal: %s: %w", src, err)
	}
	h := sha256.New()
	h.Write([]byte("bulkmove journal key 1\x00"))
	for _, s := range append([]string{abs, dst}, opts...) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	key := hex.EncodeToString(h.Sum(nil)[:16])
	return filepath.Join(state, "journal", key+".journal"), nil
}

// StateDir returns bulkmove's directory for state kept between runs:
// $XDG_STATE_HOME/bulkmove, the state home being ~/.local/state when
// XDG_STATE_HOME is unset or not absolute.
func StateDir() (string, error) {
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: %w", err)
		}
		if home == "" {
			return "", errors.New("no state directory: no home directory")
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "bulkmove"), nil
}
