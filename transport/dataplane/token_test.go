package dataplane

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadTokenModes: a token file others can read or write, or its group
// can write, is refused, whatever link leads to it (the target's mode
// counts, as a Kubernetes Secret volume mounts it: token ->
// ..data/token); 0600, 0640 and 0440 are taken. No message quotes the
// token.
func TestReadTokenModes(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	const tok = "3f9a1c77e0b24d5a8c6e19f2b7d04a3e"
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, true}, {0o440, true}, {0o644, false}, {0o604, false}, {0o602, false}, {0o620, false}, {0o666, false}} {
		data := filepath.Join(dir, "..data-"+tc.mode.String())
		os.Mkdir(data, 0o755)
		target := filepath.Join(data, "token")
		if err := os.WriteFile(target, []byte(tok+"\n"), tc.mode); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "token-"+tc.mode.String())
		os.Symlink(target, link) // the link itself is 0777: its target counts
		for _, p := range []string{target, link} {
			got, err := ReadToken(p)
			if tc.ok && (err != nil || got != tok) {
				t.Errorf("%s (%04o): %q %v, want the token", p, tc.mode, got, err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "mode")) {
				t.Errorf("%s (%04o): %v, want a refusal naming the file and its mode", p, tc.mode, err)
			}
			if err != nil && strings.Contains(err.Error(), tok[:8]) {
				t.Errorf("%s: the error quotes the token: %v", p, err)
			}
		}
	}
}

// TestReadTokenWeak: placeholders (what deploy/kubernetes ships) and
// tokens too short or too plain to be random are refused, without being
// quoted; random ones of the usual makers pass.
func TestReadTokenWeak(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		tok string
		ok  bool
	}{
		{"CHANGE-ME-openssl-rand-hex-32", false},
		{"changeme-7f3a9b2c4d1e8f60", false},
		{"Change_Me_7f3a9b2c4d1e8f60", false},
		{"placeholder-token-7f3a9b2c4d", false},
		{"replace-me-7f3a9b2c4d1e8f60", false},
		{"short-7f3a", false},
		{"aaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"abcdefghabcdefghabcdefgh", false},
		{"abababababababababababab", false},
		{"0000111100001111", false},
		{"3f9a1c77e0b24d5a8c6e19f2b7d04a3e", true}, // openssl rand -hex 16
		{"q8P1vYk3Xw9Zs2Lb7Rt0Mn4C", true},         // openssl rand -base64 18
		{"s3cret-token-0123456789", true},          // the tests' own
		{"9c1b0f4e7a2d8b3c6e5f10a9d8c7b6a5e4d3c2b1", true},
	} {
		p := filepath.Join(dir, "token")
		os.WriteFile(p, []byte(tc.tok+"\n"), 0o600)
		got, err := ReadToken(p)
		if tc.ok != (err == nil) {
			t.Errorf("%q: %q %v, want ok=%v", tc.tok, got, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), tc.tok) {
			t.Errorf("%q: the error quotes the token: %v", tc.tok, err)
		}
	}
}
