package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// TestServe: bulkmove serve as a daemon with a token; a push to
// bulkmove://HOST:PORT/ROOT/PATH lands inside that root; a wrong token,
// an unknown root, a path out of the root and an unpinned certificate are
// refused.
func TestServe(t *testing.T) {
	dir := shmDir(t)
	root := filepath.Join(dir, "root")
	addr, fp, tok := startServeBin(t, dir, "data="+root)
	bad := filepath.Join(dir, "bad-token")
	os.WriteFile(bad, []byte("wrong-token-0123456789\n"), 0o600)
	src := filepath.Join(dir, "src")
	if err := gentree.Mixed(src, 800, 4); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("bulkmove://%s/data/site/a", addr)
	out, code := runBM(t, nil, "-j", "3", "--token-file", tok, "--fingerprint", fp, src, url)
	if code != 0 {
		t.Fatalf("push: exit %d:\n%s", code, out)
	}
	treecmp.Equal(t, src, filepath.Join(root, "site/a"), treecmp.Options{Owner: os.Geteuid() == 0})
	// A second run: all up to date.
	if out, code := runBM(t, nil, "-j", "2", "--token-file", tok, "--fingerprint", fp, src, url); code != 0 || !strings.Contains(out, "0 files, 0 B") {
		t.Errorf("second push: exit %d, want nothing sent:\n%s", code, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		url  string
	}{
		{"wrong token", []string{"--token-file", bad, "--fingerprint", fp}, url},
		{"unknown root", []string{"--token-file", tok, "--fingerprint", fp}, fmt.Sprintf("bulkmove://%s/nope/x", addr)},
		{"out of the root", []string{"--token-file", tok, "--fingerprint", fp}, fmt.Sprintf("bulkmove://%s/data/../../etc", addr)},
		{"unpinned certificate", []string{"--token-file", tok}, url},
	} {
		out, code := runBM(t, nil, append(append([]string{"-j", "1", "--reconnect-timeout", "0"}, tc.args...), src, tc.url)...)
		if code == 0 {
			t.Errorf("%s: exit 0, want a refusal:\n%s", tc.name, out)
		}
	}
	if _, err := os.Stat("/etc/" + filepath.Base(src)); err == nil {
		t.Errorf("something escaped the root")
	}
}

// startServeBin starts `bulkmove serve` with the given --root values and a
// token, and returns its address, its certificate's fingerprint and the
// token file.
func startServeBin(t *testing.T, dir string, roots ...string) (addr, fp, tok string) {
	t.Helper()
	tok = filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret-token-0123456789\n"), 0o600)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr = ln.Addr().String()
	ln.Close()
	args := []string{"serve", "--listen", addr, "--token-file", tok}
	for _, r := range roots {
		args = append(args, "--root", r)
	}
	srv := exec.Command(binary(t), args...)
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	sc := bufio.NewScanner(stderr)
	deadline := time.Now().Add(10 * time.Second)
	for fp == "" && time.Now().Before(deadline) && sc.Scan() {
		if m := regexp.MustCompile(`SHA-256 ([0-9a-f]{64})`).FindStringSubmatch(sc.Text()); m != nil {
			fp = m[1]
		}
	}
	if fp == "" {
		t.Fatal("serve did not print its certificate's fingerprint")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return addr, fp, tok
}
