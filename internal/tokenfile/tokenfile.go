// Package tokenfile reads a shared secret from a file, refusing a file that
// others could read or change and a token that is a placeholder rather
// than a secret.
//
// The file's mode is that of the file the path resolves to (symlinks are
// followed: a Kubernetes Secret volume mounts each key as a symlink into a
// directory it swaps). Group read is allowed, since Secret volumes mount
// files 0440 with an fsGroup; read or write by others, write by the group,
// and an owner other than this user or root are refused.
package tokenfile

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// MinLen is the shortest token accepted.
const MinLen = 16

// Read returns the token in path: its first line, trimmed, at least MinLen
// characters with no blanks.
func Read(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat() // of what was opened, not of a name that may change
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := CheckMode(path, fi); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096)) // a token is a line: the first is enough
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	tok = strings.TrimSpace(tok)
	if len(tok) < MinLen || strings.ContainsAny(tok, " \t") {
		return "", fmt.Errorf("token file %s: want one line of at least %d characters, no blanks", path, MinLen)
	}
	if why := placeholder(tok); why != "" {
		return "", fmt.Errorf("token file %s: the token is a placeholder (%s), not a secret; make one with: openssl rand -hex 32 > %s", path, why, path)
	}
	return tok, nil
}

// CheckMode refuses a token file (fi, of path) that others could read or
// that someone other than its owner could change.
func CheckMode(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("token file %s: not a regular file", path)
	}
	perm := fi.Mode().Perm()
	if perm&0o027 != 0 {
		return fmt.Errorf("token file %s: mode %04o lets others read it or others or the group change it (group read is fine); chmod 0600 %s", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("token file %s: owned by uid %d, neither this user (%d) nor root", path, st.Uid, os.Geteuid())
	}
	return nil
}

// placeholder says why tok looks like a stand-in for a secret ("" if it
// does not): one of the words examples use, or so few distinct characters
// that it was typed, not generated (16 random hex digits have fewer than 5
// distinct ones about once in two million).
func placeholder(tok string) string {
	norm := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, tok)
	for _, w := range []string{"changeme", "replaceme", "placeholder", "yourtoken", "yoursecret", "secrethere", "tokenhere"} {
		if strings.Contains(norm, w) {
			return fmt.Sprintf("it contains %q", w)
		}
	}
	seen := map[rune]bool{}
	for _, r := range tok {
		seen[r] = true
	}
	if len(seen) < 5 {
		return fmt.Sprintf("%d distinct characters", len(seen))
	}
	return ""
}
