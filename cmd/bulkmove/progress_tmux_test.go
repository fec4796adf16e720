package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bulkmove/bulkmove/internal/testbin"
)

// The lines a screen of bulkmove's may hold while it moves a tree without
// -v: the progress line, a line per stream, and at the end the summary.
var (
	progressRe = regexp.MustCompile(`^(\[[=> ]+\] )?\d{1,3}% (· )?\S`)
	streamRe   = regexp.MustCompile(`^  (stream \d+: |\(\d+ more streams\))`)
	summaryRe  = regexp.MustCompile(`^bulkmove: [\d,]+ files, .* errors`)
)

// TestProgressInTmux runs a move slowed by --bwlimit in a real terminal
// (tmux) 80 columns wide, then one 200 wide with --progress=streams, and
// reads the screen (its scrollback included) over and over while progress
// is drawn: each capture holds exactly one progress line (and one per
// stream), no stale or wrapped one, every line narrower than the
// terminal. Mid-run the window is narrowed, and the line follows the new
// width, leaving nothing of the wider one; after the run the summary
// (which may wrap, as any message) stands alone. With NO_COLOR the same
// holds of the carriage-return display, at one width.
func TestProgressInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	bin := testbin.Build(t)
	dir := shmDir(t)
	src := randomTree(t, dir, 16, 1<<20) // 16 MiB at 2 MiB/s: 8 s
	for i, c := range []struct {
		name        string
		cols, to    int
		args        []string
		streamLines int
		env         string
	}{
		{"80 columns", 80, 50, nil, 0, "env -u NO_COLOR"},
		{"200 columns with streams", 200, 100, []string{"--progress=streams"}, 2, "env -u NO_COLOR"},
		// With NO_COLOR the line is redrawn after a carriage return alone
		// (no stream lines); a narrowed terminal's rewrapped rows are out
		// of its reach, so the width stays.
		{"NO_COLOR, carriage returns", 80, 0, []string{"--progress=streams"}, 0, "env NO_COLOR=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(dir, fmt.Sprintf("tmux%d", i))
			tmux := tmuxServer(t, sock)
			// c.env: NO_COLOR, if the test's environment has it, would
			// make the display carriage-return only. A line stands before
			// the move's output, as a command line does: a terminal
			// narrowed with the cursor on its top row puts the rewrapped
			// rows above it in the scrollback, out of a redraw's reach.
			script := fmt.Sprintf("tmux -S %s wait-for go; echo START; %s %s --journal none --batch-files 1 -j 2 --bwlimit 2M %s %s %s; echo DONE; sleep 60",
				sock, c.env, bin, strings.Join(c.args, " "), src, filepath.Join(dir, fmt.Sprintf("dst%d", i)))
			tmux("new-session", "-d", "-x", strconv.Itoa(c.cols), "-y", "40", "-s", "bm", "sh", "-c", script)
			t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
			if w := strings.TrimSpace(tmux("display-message", "-p", "-t", "bm", "#{pane_width}")); w != strconv.Itoa(c.cols) {
				t.Fatalf("pane %s columns wide, want %d", w, c.cols)
			}
			raw := filepath.Join(dir, fmt.Sprintf("raw%d", i)) // what the pane was sent
			tmux("pipe-pane", "-t", "bm", "-o", "cat > "+raw)
			tmux("wait-for", "-S", "go")

			// screen reads the pane and its scrollback: the progress
			// lines, the stream lines, whether the summary is there, and
			// what else (a stale or wrapped line) breaks the rules.
			type screen struct {
				progress, streams int
				summary, done     bool
				bad               []string
				text              string
			}
			capture := func(width int) screen {
				var s screen
				// -J: a wrapped line reads as one, too wide.
				s.text = tmux("capture-pane", "-p", "-J", "-t", "bm", "-S", "-")
				for _, l := range strings.Split(s.text, "\n") {
					if strings.TrimSpace(l) == "" {
						continue
					}
					if n := utf8.RuneCountInString(l); n >= width && !summaryRe.MatchString(l) {
						s.bad = append(s.bad, fmt.Sprintf("%d columns wide: %q", n, l))
					}
					switch {
					case progressRe.MatchString(l):
						s.progress++
					case streamRe.MatchString(l):
						s.streams++
					case summaryRe.MatchString(l):
						s.summary = true
					case l == "DONE":
						s.done = true
					case l == "START":
					default:
						s.bad = append(s.bad, fmt.Sprintf("stray line %q", l))
					}
				}
				return s
			}
			// watch takes 10 captures showing progress at width, each
			// holding it once and nothing stale; first, until settle
			// expires, it waits for the screen to be clean (the start;
			// a resize, until bulkmove has redrawn).
			watch := func(width int, settle time.Duration) {
				deadline := time.Now().Add(settle)
				for good := 0; good < 10; {
					s := capture(width)
					if s.done || s.summary {
						t.Fatalf("the run ended after %d captures at %d columns:\n%s", good, width, s.text)
					}
					clean := len(s.bad) == 0 && s.progress <= 1 && (s.progress == 0 || s.streams == c.streamLines)
					if good == 0 && !(clean && s.progress == 1) {
						if time.Now().After(deadline) {
							t.Fatalf("at %d columns, no clean screen in %v: %q\n%s", width, settle, s.bad, s.text)
						}
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if !clean {
						t.Fatalf("capture %d at %d columns: %d progress lines, %d stream lines (want 1 and %d); %q\n%s",
							good, width, s.progress, s.streams, c.streamLines, s.bad, s.text)
					}
					if s.progress == 1 { // not one caught between the block and the summary
						good++
					}
				}
			}
			watch(c.cols, 6*time.Second)
			width := c.cols
			if c.to > 0 {
				width = c.to
				tmux("resize-window", "-t", "bm", "-x", strconv.Itoa(width))
				watch(width, 2*time.Second)
			}

			deadline := time.Now().Add(30 * time.Second)
			for {
				s := capture(width)
				if s.done {
					if !s.summary || s.progress != 0 || s.streams != 0 || len(s.bad) != 0 {
						t.Errorf("after the run, want the summary alone, got %d progress lines, %d stream lines, %q:\n%s",
							s.progress, s.streams, s.bad, s.text)
					}
					if sent, err := os.ReadFile(raw); err != nil {
						t.Error(err)
					} else if esc := bytes.Count(sent, []byte("\x1b")); (esc == 0) != strings.Contains(c.env, "NO_COLOR=1") {
						t.Errorf("%d escape sequences sent with %s", esc, c.env)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not end:\n%s", s.text)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
