package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
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
	// A second run: all up to date; --stats says so, and counts the
	// bytes the streams wrote and read.
	if out, code := runBM(t, nil, "-j", "2", "--stats", "--token-file", tok, "--fingerprint", fp, src, url); code != 0 || !strings.Contains(out, "0 files, 0 B") ||
		!regexp.MustCompile(`(?m)^Number of created files: 0\nNumber of deleted files: 0\nNumber of regular files transferred: 0\n(.*\n){4}Total bytes sent: [1-9][0-9,]*\nTotal bytes received: [1-9][0-9,]*\n`).MatchString(out) {
		t.Errorf("second push: exit %d, want nothing sent, and --stats' block to say so:\n%s", code, out)
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
	// A server whose certificate is not the one pinned: refused before the
	// token goes out, saying so.
	out, code = runBM(t, nil, "-j", "1", "--reconnect-timeout", "0", "--token-file", tok, "--fingerprint", strings.Repeat("ab", 32), src, url)
	if code == 0 || !strings.Contains(out, "not the pinned") {
		t.Errorf("another certificate pinned: exit %d, want a refusal naming the pinned certificate:\n%s", code, out)
	}
}

// startServeBin starts `bulkmove serve` with the given --root values and a
// token, and returns its address, its certificate's fingerprint and the
// token file.
func startServeBin(t *testing.T, dir string, roots ...string) (addr, fp, tok string) {
	t.Helper()
	p := startServeProc(t, dir, nil, roots...)
	return p.addr, p.fp, p.tok
}

// serveProc is a running `bulkmove serve`.
type serveProc struct {
	addr, fp, tok string
	cmd           *exec.Cmd
	log           *lockedBuf // its stderr
}

// startServeProc starts `bulkmove serve` with the given --root values, a
// token and flags.
func startServeProc(t *testing.T, dir string, flags []string, roots ...string) *serveProc {
	t.Helper()
	p := &serveProc{tok: filepath.Join(dir, "token"), log: &lockedBuf{}}
	os.WriteFile(p.tok, []byte("s3cret-token-0123456789\n"), 0o600)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	p.addr = ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--listen", p.addr, "--token-file", p.tok}, flags...)
	for _, r := range roots {
		args = append(args, "--root", r)
	}
	p.cmd = exec.Command(testbin.Build(t), args...)
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	deadline := time.Now().Add(10 * time.Second)
	for p.fp == "" && time.Now().Before(deadline) && sc.Scan() {
		p.log.WriteString(sc.Text() + "\n")
		if m := regexp.MustCompile(`SHA-256 ([0-9a-f]{64})`).FindStringSubmatch(sc.Text()); m != nil {
			p.fp = m[1]
		}
	}
	if p.fp == "" {
		t.Fatal("serve did not print its certificate's fingerprint")
	}
	go func() {
		for sc.Scan() {
			p.log.WriteString(sc.Text() + "\n")
		}
	}()
	return p
}

// lockedBuf is a bytes.Buffer safe for concurrent use.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuf) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.WriteString(s)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
