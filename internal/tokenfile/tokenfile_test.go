package tokenfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRead: the modes and contents a token file may have, through a
// symlink as a Kubernetes Secret volume mounts it.
func TestRead(t *testing.T) {
	const good = "3f1c9a7be2d04c58a6e1f0b97d2c4e83"
	for _, c := range []struct {
		name, content string
		perm          os.FileMode
		want          string // in the error; "" for none
	}{
		{"0600", good + "\n", 0o600, ""},
		{"0400", good, 0o400, ""},
		{"group-readable", good, 0o440, ""},
		{"group 0640", good, 0o640, ""},
		{"others read", good, 0o644, "mode 0644"},
		{"others write", good, 0o602, "mode 0602"},
		{"group write", good, 0o660, "mode 0660"},
		{"short", "0123456789abcde", 0o600, "at least 16"},
		{"blank", "0123456789 abcdef0123", 0o600, "no blanks"},
		{"placeholder", "CHANGE-ME-openssl-rand-hex-32", 0o600, "placeholder"},
		{"typed", "aaaaaaaaaaaaaaaaaaaa", 0o600, "placeholder"},
		{"typed 2", "abababababababab", 0o600, "placeholder"},
	} {
		dir := t.TempDir()
		real := filepath.Join(dir, "..data", "token")
		os.MkdirAll(filepath.Dir(real), 0o755)
		os.WriteFile(real, []byte(c.content), c.perm)
		os.Chmod(real, c.perm)
		link := filepath.Join(dir, "token")
		os.Symlink(filepath.Join("..data", "token"), link)
		tok, err := Read(link)
		switch {
		case c.want == "" && (err != nil || tok != strings.TrimSpace(c.content)):
			t.Errorf("%s: %q, %v; want the token", c.name, tok, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), link)):
			t.Errorf("%s: %q, %v; want an error naming the file and %q", c.name, tok, err, c.want)
		case err != nil && strings.Contains(err.Error(), c.content):
			t.Errorf("%s: the error shows the token: %v", c.name, err)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("a missing file: %v", err)
	}
}
