package main

import (
	"crypto/tls"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/transport/dataplane"
)

// hostileNames are file names an attacker would choose: an escape sequence
// that retitles the terminal (OSC 0, ended by BEL), one that clears it (CSI
// 2J), a newline that forges a line, bytes that are not UTF-8, a C1 CSI, a
// backslash that would make the escaping ambiguous.
var hostileNames = []string{
	"a\x1b]0;pwned\x07b",
	"x\x1b[2J",
	"new\nline",
	"bad\xff\xfe",
	"c1\u009b2J",
	`back\slash`,
}

// hostilenames [-dir|-fifo] DIR: creates each of hostileNames in DIR: a
// file holding its name, or (-dir) a directory holding a file (in the way
// of a file of that name), or (-fifo) a FIFO.
func cmdHostilenames(ts *testscript.TestScript, neg bool, args []string) {
	kind := "file"
	if len(args) == 2 {
		kind, args = strings.TrimPrefix(args[0], "-"), args[1:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: hostilenames [-dir|-fifo] DIR")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	for _, n := range hostileNames {
		p := filepath.Join(dir, n)
		switch kind {
		case "file":
			ts.Check(os.WriteFile(p, []byte(n), 0o644))
		case "dir":
			ts.Check(os.MkdirAll(p, 0o755))
			ts.Check(os.WriteFile(filepath.Join(p, "in-the-way"), nil, 0o644))
		case "fifo":
			ts.Check(syscall.Mkfifo(p, 0o644))
		default:
			ts.Fatalf("hostilenames: unknown kind %q", kind)
		}
	}
}

// termclean stdout|stderr|FILE: the text is safe on a terminal: valid
// UTF-8, and no control character but the newline (no ESC, BEL, CR, C1).
func cmdTermclean(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: termclean stdout|stderr|FILE")
	}
	var text string
	switch args[0] {
	case "stdout", "stderr":
		text = ts.ReadFile(args[0])
	default:
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		ts.Check(err)
		text = string(b)
	}
	err := termClean(text)
	switch {
	case err != nil && !neg:
		ts.Fatalf("%s: %v", args[0], err)
	case err == nil && neg:
		ts.Fatalf("%s is clean, want a control character", args[0])
	}
}

// termClean says where text holds what a terminal would act on.
func termClean(text string) error {
	for i, r := range text {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(text[i:], "\ufffd"):
			return fmt.Errorf("byte %#x at %d is not UTF-8: %q", text[i], i, around(text, i))
		case r == '\n':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return fmt.Errorf("control character %U at %d: %q", r, i, around(text, i))
		}
	}
	return nil
}

func around(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}

// TestTerminalHostileNames runs bulkmove in a real terminal (tmux) on a
// tree of hostile names, listed by --dry-run and named by errors: the
// pane's title stays as it was, and the screen shows the names escaped.
func TestTerminalHostileNames(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	bin := testbin.Build(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		os.MkdirAll(d, 0o755)
	}
	for _, n := range hostileNames {
		os.WriteFile(filepath.Join(src, n), []byte(n), 0o644)
		os.MkdirAll(filepath.Join(dst, n, "in-the-way"), 0o755) // an error naming it
	}
	sock := filepath.Join(dir, "tmux.sock")
	tmux := tmuxServer(t, sock)
	// bulkmove starts once the pane has its title.
	script := fmt.Sprintf("tmux -S %s wait-for go; %s --dry-run %s %s; %s --journal none %s %s; echo DONE; sleep 60", sock, bin, src, dst, bin, src, dst)
	tmux("new-session", "-d", "-x", "200", "-y", "60", "-s", "bm", "sh", "-c", script)
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	tmux("select-pane", "-t", "bm", "-T", "untouched")
	tmux("wait-for", "-S", "go")
	var screen string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if screen = tmux("capture-pane", "-p", "-t", "bm", "-S", "-200"); strings.Contains(screen, "DONE") {
			break
		}
	}
	if !strings.Contains(screen, "DONE") {
		t.Fatalf("bulkmove did not finish in the terminal:\n%s", screen)
	}
	if title := strings.TrimSpace(tmux("display-message", "-p", "-t", "bm", "#{pane_title}")); title != "untouched" {
		t.Errorf("a file name retitled the terminal: pane title %q", title)
	}
	for _, want := range []string{`file a\x1b]0;pwned\x07b`, `file x\x1b[2J`, `file new\x0aline`, `bulkmove: ` + dst + `: a\x1b]0;pwned\x07b: `} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal does not show %q:\n%s", want, screen)
		}
	}
}

// TestServeLogHostile: an authenticated sender chooses the job and the
// destination it names; two streams of one job that disagree on the
// destination are refused and logged. serve's log shows them escaped.
func TestServeLogHostile(t *testing.T) {
	dir := shmDir(t)
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret-token-0123456789\n"), 0o600)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	os.MkdirAll(filepath.Join(dir, "root"), 0o755)
	logPath := filepath.Join(dir, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	srv := exec.Command(testbin.Build(t), "serve", "--listen", addr, "--token-file", tok, "--root", "data="+filepath.Join(dir, "root"))
	srv.Stderr = logf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	dial := func(g dataplane.Greeting) *tls.Conn {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
			if err == nil {
				if err := dataplane.WriteGreeting(c, g); err != nil {
					t.Fatal(err)
				}
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve does not answer: %v", err)
			}
		}
	}
	job := "job\x1b]0;pwned\x07"
	first := dial(dataplane.Greeting{Token: "s3cret-token-0123456789", Job: job, Index: 0, Dest: "data/a"})
	defer first.Close()
	// The first stream opens the job: its destination is made, then the
	// job registered at once (a fixed sleep could end before either on a
	// loaded machine).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "root", "a")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first stream did not open its job (no data/a)")
		}
	}
	time.Sleep(50 * time.Millisecond) // from the directory made to the job registered
	second := dial(dataplane.Greeting{Token: "s3cret-token-0123456789", Job: job, Index: 1, Dest: "data/b\x1b[2J\n"})
	io.Copy(io.Discard, second) // the refusal, then the close
	second.Close()
	var log string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(logPath)
		if log = string(b); strings.Contains(log, "asks for") {
			break
		}
	}
	if err := termClean(log); err != nil {
		t.Errorf("serve's log: %v\n%s", err, log)
	}
	if want := `job job\x1b]0;pwned\x07: stream 1 asks for data/b\x1b[2J\x0a, the job writes to data/a`; !strings.Contains(log, want) {
		t.Errorf("serve's log lacks %q:\n%s", want, log)
	}
}

// TestNoRawPrints keeps every message on stderr, in a log or in a listing
// on the job's stdout going through printf or termsafe.Errorf (which escape what
// they print): it fails on a fmt.Fprint* call to one of those writers that
// prints anything but a single constant text (a usage message).
func TestNoRawPrints(t *testing.T) {
	guarded := map[string]bool{"stderr": true, "os.Stderr": true, "j.stderr": true, "p.stderr": true,
		"s.log": true, "j.log": true, "lf": true, "l.j.stderr": true, "j.stdout": true}
	files, _ := filepath.Glob("*.go")
	engine, _ := filepath.Glob("../../internal/engine/*.go")
	parts, _ := filepath.Glob("../../internal/engine/*/*.go") // throttle, ...
	files = append(append(files, engine...), parts...)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == "shown.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "Fprint") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" {
				return true
			}
			var w strings.Builder
			printer.Fprint(&w, fset, call.Args[0])
			if !guarded[w.String()] {
				return true
			}
			if _, ok := call.Args[1].(*ast.Ident); sel.Sel.Name == "Fprint" && len(call.Args) == 2 && ok {
				return true // a usage text
			}
			t.Errorf("%s: fmt.%s to %s: print with printf or termsafe.Errorf, which escape names", fset.Position(call.Pos()), sel.Sel.Name, w.String())
			return true
		})
	}
}

// tmuxServer returns how to run a tmux command against the server on
// socket sock (no user config read), failing t if tmux fails.
func tmuxServer(t *testing.T, sock string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}
