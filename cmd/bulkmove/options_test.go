package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// optionRow is one option that applies to more than one mode: the tree it
// is tried on (SRC, and what DEST holds before) and what it must leave.
type optionRow struct {
	name  string
	args  []string
	tree  func(t *testing.T, src, dst string)
	check func(t *testing.T, dst, out string, code int)
}

// TestOptionsSameEverywhere: every option of the table has the same effect
// on a local move, a push (to local agents, --via-agent: the wire
// protocol without SSH), a pull (over the test sshd: the remote sender
// takes the options from the Config the puller sends) and a push through
// serve (whose policy allows all of these).
func TestOptionsSameEverywhere(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	cfg := srv.WriteSSHConfig("box2")
	dir := shmDir(t)
	serveRoot := filepath.Join(dir, "serve")
	if err := os.MkdirAll(serveRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	addr, fp, tok := startServeBin(t, dir, "data="+serveRoot)
	modes := []struct {
		name string
		dst  func(name string) string // DEST's path on this host
		run  func(args []string, src, dst, name string) (string, int)
	}{
		{"local", func(n string) string { return filepath.Join(dir, n) },
			func(args []string, src, dst, _ string) (string, int) {
				return runBM(t, nil, append(args, src, dst)...)
			}},
		{"push", func(n string) string { return filepath.Join(dir, n) },
			func(args []string, src, dst, _ string) (string, int) {
				return runBM(t, nil, append(append([]string{"--via-agent"}, args...), src, dst)...)
			}},
		{"pull", func(n string) string { return filepath.Join(dir, n) },
			func(args []string, src, dst, _ string) (string, int) {
				return runBM(t, nil, append(append([]string{"--ssh-config", cfg}, args...), "box2:"+src, dst)...)
			}},
		{"serve", func(n string) string { return filepath.Join(serveRoot, n) },
			func(args []string, src, _, name string) (string, int) {
				url := fmt.Sprintf("bulkmove://%s/data/%s", addr, name)
				return runBM(t, nil, append(append([]string{"--token-file", tok, "--fingerprint", fp}, args...), src, url)...)
			}},
	}
	write := func(t *testing.T, p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	has := func(t *testing.T, p string, want bool) {
		t.Helper()
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", p, err == nil, want)
		}
	}
	content := func(t *testing.T, p, want string) {
		t.Helper()
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s: %q (%v), want %q", p, b, err, want)
		}
	}
	exit := func(t *testing.T, out string, code, want int) {
		t.Helper()
		if code != want {
			t.Fatalf("exit %d, want %d:\n%s", code, want, out)
		}
	}
	old := time.Now().Add(-time.Hour)
	// sameStat makes DEST's a.txt the size and mtime of SRC's, another
	// content: what the quick check takes for up to date.
	sameStat := func(t *testing.T, src, dst string) {
		write(t, filepath.Join(src, "a.txt"), "source")
		write(t, filepath.Join(dst, "a.txt"), "stale!")
		os.Chtimes(filepath.Join(src, "a.txt"), old, old)
		os.Chtimes(filepath.Join(dst, "a.txt"), old, old)
	}
	rows := []optionRow{
		{"exclude", []string{"--exclude", "*.tmp"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "a.txt"), "a")
				write(t, filepath.Join(src, "b.tmp"), "b")
				write(t, filepath.Join(src, "sub/c.tmp"), "c")
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				has(t, filepath.Join(dst, "a.txt"), true)
				has(t, filepath.Join(dst, "b.tmp"), false)
				has(t, filepath.Join(dst, "sub/c.tmp"), false)
			}},
		{"delete", []string{"--delete"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "a.txt"), "a")
				write(t, filepath.Join(dst, "old"), "old")
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				has(t, filepath.Join(dst, "old"), false)
				content(t, filepath.Join(dst, "a.txt"), "a")
			}},
		{"delete-excluded", []string{"--delete-excluded", "--exclude", "*.tmp"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "a.txt"), "a")
				write(t, filepath.Join(dst, "x.tmp"), "x")
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				has(t, filepath.Join(dst, "x.tmp"), false)
			}},
		{"max-delete", []string{"--delete", "--max-delete", "1"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "a.txt"), "a")
				for _, n := range []string{"x1", "x2", "x3"} {
					write(t, filepath.Join(dst, n), n)
				}
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, exitMaxDelete)
				left := 0
				for _, n := range []string{"x1", "x2", "x3"} {
					if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
						left++
					}
				}
				if left != 2 {
					t.Errorf("%d of 3 extra files left, want 2 (--max-delete 1)", left)
				}
			}},
		{"default quick check", nil, sameStat,
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				content(t, filepath.Join(dst, "a.txt"), "stale!")
			}},
		{"checksum", []string{"--checksum"}, sameStat,
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				content(t, filepath.Join(dst, "a.txt"), "source")
			}},
		{"no-quick-check", []string{"--no-quick-check"}, sameStat,
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				content(t, filepath.Join(dst, "a.txt"), "source")
			}},
		{"size-only", []string{"--size-only"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "a.txt"), "source")
				write(t, filepath.Join(dst, "a.txt"), "stale!") // same size, newer mtime
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				content(t, filepath.Join(dst, "a.txt"), "stale!")
			}},
		{"ignore-existing", []string{"--ignore-existing"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "a.txt"), "source, longer")
				write(t, filepath.Join(src, "b.txt"), "b")
				write(t, filepath.Join(dst, "a.txt"), "there")
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				content(t, filepath.Join(dst, "a.txt"), "there")
				content(t, filepath.Join(dst, "b.txt"), "b")
			}},
		{"split-size", []string{"--split-size", "64KiB", "--batch-size", "64KiB"},
			func(t *testing.T, src, dst string) {
				write(t, filepath.Join(src, "big"), strings.Repeat("0123456789abcdef", 40000))
			},
			func(t *testing.T, dst, out string, code int) {
				exit(t, out, code, 0)
				content(t, filepath.Join(dst, "big"), strings.Repeat("0123456789abcdef", 40000))
			}},
	}
	for i, row := range rows {
		for _, m := range modes {
			t.Run(row.name+"/"+m.name, func(t *testing.T) {
				name := fmt.Sprintf("r%d-%s", i, m.name)
				src, dst := filepath.Join(dir, name+"-src"), m.dst(name)
				if err := os.MkdirAll(src, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dst, 0o755); err != nil {
					t.Fatal(err)
				}
				row.tree(t, src, dst)
				args := append([]string{"-j", "2", "--journal", "none", "--no-delete-guard"}, row.args...)
				if !strings.Contains(strings.Join(row.args, " "), "delete") {
					args = append([]string{"-j", "2", "--journal", "none"}, row.args...)
				}
				out, code := m.run(args, src, dst, name)
				row.check(t, dst, out, code)
			})
		}
	}
}
