package dataplane

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unicode"
)

// ReadToken reads a token file (`bulkmove serve --token-file`, the
// sender's --token-file): its first line, trimmed. The file, after
// symlinks are followed (a Kubernetes Secret volume's are), must be a
// regular file or a pipe that others cannot read or write and its group
// cannot write: 0600, or 0640/0440 for a group (a Secret mounted with an
// fsGroup). The token must not be a placeholder and must look random (see
// CheckToken). No error quotes the token.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat() // the file opened, wherever its links led
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() && fi.Mode()&os.ModeNamedPipe == 0 {
		return "", fmt.Errorf("token file %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o026 != 0 {
		return "", fmt.Errorf("token file %s: mode %04o lets others read it or its group change it: chmod 600 (or 640 to share it with a group)", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	tok = strings.TrimSpace(tok)
	if err := CheckToken(tok); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

// placeholders are words that mark a token as one shipped to be replaced
// (an example's CHANGE-ME-...), compared in lower case with
// anything but letters and digits removed.
var placeholders = []string{"changeme", "changethis", "placeholder", "replaceme", "replacethis",
	"example", "yourtoken", "yoursecret", "tokenhere", "secrethere", "dummy", "fixme"}

// CheckToken refuses a token that is too weak to stand for a password
// across a network: shorter than 16 characters, with blanks, a
// placeholder, or with too little variety to be random (fewer than 8
// distinct characters, a pattern repeated, or under 48 bits by the
// frequency of its characters). `openssl rand -hex 24` passes.
func CheckToken(tok string) error {
	const how = "make one with: openssl rand -hex 24"
	if len(tok) < 16 || strings.ContainsFunc(tok, unicode.IsSpace) {
		return fmt.Errorf("want one line of at least 16 characters, no blanks (%s)", how)
	}
	var norm strings.Builder
	for _, r := range strings.ToLower(tok) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			norm.WriteRune(r)
		}
	}
	for _, w := range placeholders {
		if strings.Contains(norm.String(), w) {
			return fmt.Errorf("the token is a placeholder (it says %q): replace it (%s)", w, how)
		}
	}
	count := map[rune]int{}
	n := 0
	for _, r := range tok {
		count[r]++
		n++
	}
	bits := 0.0
	for _, c := range count {
		p := float64(c) / float64(n)
		bits -= float64(n) * p * math.Log2(p)
	}
	if len(count) < 8 || repeats(tok) || bits < 48 {
		return fmt.Errorf("the token does not look random (too few distinct characters, or a pattern): %s", how)
	}
	return nil
}

// repeats reports whether s is a shorter string repeated (or cut short).
func repeats(s string) bool {
	for p := 1; p <= len(s)/2; p++ {
		if s[p:] == s[:len(s)-p] {
			return true
		}
	}
	return false
}
