package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
)

// ttyWriter is stderr while a progress line is shown: every other message
// first clears the line, and the next redraw puts it back, so messages and
// the progress line never mix.
type ttyWriter struct {
	mu    sync.Mutex
	w     io.Writer
	shown []string // the progress block on screen; the cursor ends its last line
	// crOnly: NO_COLOR or TERM=dumb, so no escape sequence is written: the
	// line is redrawn after a carriage return, the old one blanked with
	// spaces, and there is no per-stream line (that would need the cursor
	// moved up).
	crOnly bool
	// size, if set, gives the terminal's columns and rows (tests); else
	// stderr's.
	size func() (cols, rows int)
}

// dims is the terminal's size now: asked of the terminal at every redraw
// and clear, so that a resize between SIGWINCH and its redraw is still
// measured right. 80 by 24 if the terminal does not say.
func (t *ttyWriter) dims() (cols, rows int) {
	if t.size != nil {
		return t.size()
	}
	if f, ok := t.w.(*os.File); ok {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return w, h
		}
	}
	return 80, 24
}

func (t *ttyWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.erase(); e != "" {
		// One write: a terminal never shows the block erased and the
		// message not yet there.
		if _, err := io.WriteString(t.w, e+string(p)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return t.w.Write(p)
}

// erase is what erases the progress block, which is then taken as
// gone; t.mu is held.
//
// Each line was drawn narrower than the terminal, so it took one row; but
// a terminal narrowed since rewraps it (tmux, VTE, iTerm2, kitty and
// Windows Terminal do) into as many rows as the new width needs, and all
// of them are erased. (A terminal that cuts lines short instead, such as
// xterm, then loses as many rows above the block.)
func (t *ttyWriter) erase() string {
	if len(t.shown) == 0 {
		return ""
	}
	defer func() { t.shown = nil }()
	if t.crOnly {
		return "\r" + strings.Repeat(" ", utf8.RuneCountInString(t.shown[0])) + "\r"
	}
	cols, _ := t.dims()
	rows := 0
	for _, l := range t.shown {
		rows += max(1, (utf8.RuneCountInString(l)+cols-1)/cols)
	}
	// Row by row (erase in line), up to the block's first: erasing the
	// screen from its top-left corner instead would have tmux (its
	// scroll-on-clear) keep the old lines in the scrollback.
	return "\r" + clearRow + strings.Repeat("\x1b[1A"+clearRow, rows-1)
}

const clearRow = "\x1b[K"

// draw replaces the progress block with lines.
func (t *ttyWriter) draw(lines []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.crOnly {
		lines = lines[:1]
	}
	// One write, so that a terminal shows the old block or the new one,
	// never none.
	io.WriteString(t.w, t.erase()+strings.Join(lines, "\n"))
	t.shown = lines
}

// stop erases the block for good.
func (t *ttyWriter) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, t.erase())
}

// isTerminalWriter says whether w is a terminal (a character device, as
// the engine asks of stdin for SSH's prompts).
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// plainTerminal reports whether the environment asks for no escape
// sequences: NO_COLOR set (to anything but "", as no-color.org has it) or
// TERM=dumb.
func plainTerminal(getenv func(string) string) bool {
	return getenv("NO_COLOR") != "" || getenv("TERM") == "dumb"
}

const (
	redrawEvery = 100 * time.Millisecond // at most 10 redraws a second
	logEvery    = 10 * time.Second       // a line in a log (stderr not a terminal, -v)
	rateSpan    = 5 * time.Second        // the rate and ETA are smoothed over this
)

// progress is the job's progress display (engine.Job.Watch): on a
// terminal (tw, stderr's ttyWriter) redrawn at most 10 times a second, to
// the terminal's width, followed on resize (SIGWINCH); without one, with
// -v, a plain line on stderr every 10 s; else none (nil). mode is
// --progress: streams adds a line per stream.
func progress(tw *ttyWriter, stderr io.Writer, mode string, verbose bool) func(*metrics.Job) (stop func()) {
	if tw == nil && !verbose {
		return nil
	}
	if tw != nil {
		tw.mu.Lock()
		tw.crOnly = plainTerminal(os.Getenv)
		tw.mu.Unlock()
	}
	return func(m *metrics.Job) func() {
		every := logEvery
		if tw != nil {
			every = redrawEvery
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			var winch chan os.Signal
			if tw != nil {
				winch = make(chan os.Signal, 1)
				signal.Notify(winch, syscall.SIGWINCH)
				defer signal.Stop(winch)
			}
			t := time.NewTicker(every)
			defer t.Stop()
			s := newSmoother()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				case <-winch:
					// Redraw to the new width now; the next tick comes a
					// whole interval later.
					t.Reset(every)
				}
				j := s.job(m, time.Now())
				if tw == nil {
					termsafe.Errorf(stderr, "%s", progressline.Line(j, 0))
					continue
				}
				cols, rows := tw.dims()
				lines := []string{progressline.Line(j, cols)}
				if mode == "streams" {
					// A block taller than the screen could not be erased:
					// the streams that do not fit are counted.
					lines = append(lines, streamLines(m, cols, rows-2)...)
				}
				tw.draw(lines)
			}
		}()
		return func() {
			cancel()
			<-done
			if tw != nil {
				tw.stop()
			}
		}
	}
}

// smoother turns a job's counters into what the line shows, the rates and
// the ETA smoothed over rateSpan.
type smoother struct{ bytes, files, work *metrics.Window }

func newSmoother() *smoother {
	return &smoother{metrics.NewWindow(rateSpan), metrics.NewWindow(rateSpan), metrics.NewWindow(rateSpan)}
}

func (s *smoother) job(m *metrics.Job, now time.Time) progressline.Job {
	done, planned := m.Work()
	j := progressline.Job{
		DoneBytes:    m.DoneBytes.Load(),
		PlannedBytes: m.PlannedBytes.Load(),
		Files:        m.DoneFiles.Load() + m.Skipped.Load(),
		WalkDone:     m.WalkDone.Load(),
		ETA:          -1,
		Streams:      m.Active(),
		Limit:        m.Limit.Rate(),
		Zstd:         -1,
	}
	j.Rate = s.bytes.Add(now, float64(j.DoneBytes))
	j.FileRate = s.files.Add(now, float64(j.Files))
	switch {
	case planned > 0:
		j.Fraction = done / planned
	case j.WalkDone:
		j.Fraction = 1 // nothing to move
	}
	if r := s.work.Add(now, done); r > 0 {
		secs := max(planned-done, 0) / r
		j.ETA = time.Duration(min(secs*float64(time.Second), math.MaxInt64/2))
	} else if j.WalkDone && done >= planned {
		j.ETA = 0
	}
	if in, out := m.Compressed(); in > 0 {
		j.Zstd = int(100 * out / in)
	}
	if v := m.Verdict(); v != nil && v.Resource != metrics.Idle {
		j.Bottleneck = v.Resource
	}
	return j
}

// streamLines is a line per stream in use, each narrower than cols, and
// at most most lines (the last then counting the streams not shown).
func streamLines(m *metrics.Job, cols, most int) []string {
	in := m.StreamsInUse()
	if most < 1 {
		return nil
	}
	n := len(in)
	if n > most {
		n = most - 1
	}
	out := make([]string, n, n+1)
	for i, c := range in[:n] {
		out[i] = progressline.StreamLine(i, progressline.Stream{
			Bytes: c.BytesSent.Load(), Files: c.FilesSent.Load(),
			Read: time.Duration(c.ReadNanos.Load()), Send: time.Duration(c.SendNanos.Load()),
			Wait: time.Duration(c.WaitNanos.Load()),
		}, cols)
	}
	if n < len(in) {
		out = append(out, progressline.Truncate(fmt.Sprintf("  (%d more streams)", len(in)-n), cols-1))
	}
	return out
}
