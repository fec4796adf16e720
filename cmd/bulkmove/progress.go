package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/metrics"
)

// ttyWriter is stderr while a progress line is shown: every other message
// first clears the line, and the next redraw puts it back, so messages and
// the progress line never mix.
type ttyWriter struct {
	mu     sync.Mutex
	w      io.Writer
	active bool
	lines  int // lines of the progress block on screen, below the cursor's line
}

const clearLine = "\r\x1b[K"

func (t *ttyWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.clear()
	}
	return t.w.Write(p)
}

// clear erases the progress block; t.mu is held.
func (t *ttyWriter) clear() {
	var b strings.Builder
	b.WriteString(clearLine)
	for range t.lines {
		b.WriteString("\x1b[1A" + clearLine) // up one line, clear it
	}
	io.WriteString(t.w, b.String())
	t.lines = 0
}

// draw replaces the progress block with lines.
func (t *ttyWriter) draw(lines []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clear()
	io.WriteString(t.w, strings.Join(lines, "\n"))
	t.lines = len(lines) - 1
	t.active = true
}

// stop erases the block for good.
func (t *ttyWriter) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active {
		t.clear()
	}
	t.active = false
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

// progress is the job's progress display (engine.Job.Watch): on a
// terminal (tw, stderr's ttyWriter) redrawn at most 10 times a second;
// without one, with -v, a plain line on stderr every 10 s; else none
// (nil). mode is --progress: streams adds a line per stream.
func progress(tw *ttyWriter, stderr io.Writer, mode string, verbose bool) func(*metrics.Job) (stop func()) {
	if tw == nil && !verbose {
		return nil
	}
	return func(m *metrics.Job) func() {
		every := 10 * time.Second
		if tw != nil {
			every = 100 * time.Millisecond
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(every)
			defer t.Stop()
			prev := struct {
				at           time.Time
				bytes, files int64
			}{time.Now(), 0, 0}
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				now := time.Now()
				b, f := m.DoneBytes.Load(), m.DoneFiles.Load()
				dt := now.Sub(prev.at).Seconds()
				lines := []string{progressLine(m, float64(b-prev.bytes)/dt, float64(f-prev.files)/dt)}
				if mode == "streams" {
					lines = append(lines, streamLines(m)...)
				}
				prev.at, prev.bytes, prev.files = now, b, f
				if tw != nil {
					tw.draw(lines)
				} else {
					termsafe.Errorf(stderr, "%s", lines[0])
				}
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

func progressLine(m *metrics.Job, bps, fps float64) string {
	planned := units.Size(m.PlannedBytes.Load())
	if !m.WalkDone.Load() {
		planned += "+" // still growing: the walk goes on
	}
	eta := "ETA ?"
	if s := m.ETA(); s >= 0 && m.WalkDone.Load() {
		eta = "ETA " + (time.Duration(s) * time.Second).String()
	}
	extra := "" // the bandwidth limit and the bottleneck, if any
	if r := m.Limit.Rate(); r > 0 {
		extra = " · limit " + units.Rate(r)
	}
	if in, out := m.Compressed(); in > 0 {
		extra += fmt.Sprintf(" · zstd %.0f%%", 100*float64(out)/float64(in))
	}
	if v := m.Verdict(); v != nil && v.Resource != metrics.Idle {
		extra += " · bottleneck " + v.Resource
	}
	return fmt.Sprintf("%s / %s · %s files · %s files/s · %s · %s · %d streams%s",
		units.Size(m.DoneBytes.Load()), planned,
		units.Count(m.DoneFiles.Load()+m.Skipped.Load()), units.Count(int64(fps)),
		units.Rate(int64(max(bps, 0))), eta, m.Active(), extra)
}

func streamLines(m *metrics.Job) []string {
	in := m.StreamsInUse()
	out := make([]string, len(in))
	for i, c := range in {
		out[i] = fmt.Sprintf("  stream %d: %s, %s files, read %.1fs, send blocked %.1fs, waiting %.1fs",
			i, units.Size(c.BytesSent.Load()), units.Count(c.FilesSent.Load()),
			float64(c.ReadNanos.Load())/1e9, float64(c.SendNanos.Load())/1e9, float64(c.WaitNanos.Load())/1e9)
	}
	return out
}
