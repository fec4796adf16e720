package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
)

// TestProgressOnTerminal runs bulkmove under a pseudo-terminal (script(1))
// and checks what the screen gets: a progress line redrawn in place at most
// 10 times a second, then the summary on a clean line; and nothing of the
// kind when stderr is not a terminal.
func TestProgressOnTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) from util-linux is needed for a pseudo-terminal")
	}
	bin := testbin.Build(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Small(src, 10000, 100, 1024); err != nil {
		t.Fatal(err)
	}
	// Paced (10 MiB at 8 MB/s) so that the run lasts many redraws on any
	// machine.
	start := time.Now()
	out, err := exec.Command(script, "-q", "-e", "-c", bin+" --via-agent --progress=streams -j 2 --bwlimit 8M "+src+" "+filepath.Join(dir, "dst"), "/dev/null").CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("%v\n%q", err, out)
	}
	screen := string(out)
	line := regexp.MustCompile(`\d+% · [\d.]+ [KMG]?i?B / [\d.]+ [KMG]?i?B\+? · [\d.]+ [KMG]?i?B/s · ETA \S+`)
	if !line.MatchString(screen) {
		t.Fatalf("no progress line on the terminal:\n%q", screen)
	}
	if !strings.Contains(screen, "  stream 1: ") {
		t.Errorf("--progress=streams shows no per-stream lines:\n%q", screen)
	}
	if redraws, max := len(line.FindAllString(screen, -1)), int(elapsed.Seconds()*10)+2; redraws > max {
		t.Errorf("%d redraws in %v: more than 10 a second", redraws, elapsed)
	}
	// The summary comes last, on a line of its own after the block is cleared.
	if !regexp.MustCompile("\r\x1b\\[K(\x1b\\[1A\x1b\\[K)*bulkmove: 10,000 files, .* 0 errors[^\n]*\r?\n$").MatchString(screen) {
		t.Errorf("the summary is not on a clean last line:\n%q", screen[max(0, len(screen)-300):])
	}

	// Not a terminal, no -v: no progress at all.
	plain, err := exec.Command(bin, "-j", "2", src, filepath.Join(dir, "dst2")).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(plain), "\r\x1b") || strings.Count(string(plain), "\n") != 1 {
		t.Errorf("without a terminal, want just the summary line, got %q", plain)
	}
}

// TestProgressShown: the display is drawn on a terminal only, and neither
// with --progress=none nor with -q. (/dev/null is a character device, as
// a terminal is.)
func TestProgressShown(t *testing.T) {
	tty, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, c := range []struct {
		name  string
		set   func(*engine.Config)
		to    io.Writer
		shown bool
	}{
		{"terminal", func(*engine.Config) {}, tty, true},
		{"a file", func(*engine.Config) {}, file, false},
		{"--progress=none", func(c *engine.Config) { c.Progress = "none" }, tty, false},
		{"-q", func(c *engine.Config) { c.Quiet = true }, tty, false},
		{"-q -P", func(c *engine.Config) { c.Quiet, c.Progress = true, "auto" }, tty, false},
	} {
		cfg := engine.DefaultConfig()
		c.set(&cfg)
		if got := progressShown(cfg, c.to); got != c.shown {
			t.Errorf("%s: shown %v, want %v", c.name, got, c.shown)
		}
	}
}
