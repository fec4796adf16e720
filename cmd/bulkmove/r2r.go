package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/itemize"
	"github.com/bulkmove/bulkmove/internal/progressline"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/metrics"
	"github.com/bulkmove/bulkmove/wire"
)

const r2rUsage = `usage: bulkmove --r2r-send --config CONFIG SRC DEST (started by a control host, not by hand)

The sending end of a remote-to-remote move (bulkmove box1:/src box2:/dst
on a control host): it walks SRC at once and pushes it to DEST the way the
control host tells it on standard input. The job's options come whole in
--config.
`

// r2rSendFlags is bulkmove --r2r-send --config CONFIG SRC DEST: box1's end of
// a remote-to-remote move, started by the control host over SSH (the
// engine's r2r.go builds its command line).
func r2rSendFlags(fs *pflag.FlagSet) func(*call) int {
	cfg := fs.String("config", "", "the job's options, as the control host gives them (engine.EncodeSenderConfig)")
	verify := fs.String("verify", "", "compare SRC with DEST instead of moving it: content, or meta (verify --no-content)")
	log := fs.Bool("log", false, "send the control host the job's --log-file lines (it has a --log-file)")
	logFormat := fs.String("log-format", "", "with --log: the control host's --log-file-format")
	return func(x *call) int {
		if len(x.args) != 2 {
			termsafe.Errorf(x.stderr, "usage: bulkmove --r2r-send --config CONFIG SRC DEST (started by a control host, not by hand)")
			return exitUsage
		}
		c, err := engine.DecodeSenderConfig(*cfg)
		if err == nil {
			err = c.Check()
		}
		if err == nil && *verify != "" && *verify != "content" && *verify != "meta" {
			err = fmt.Errorf("--verify %q: want content or meta", *verify)
		}
		if err == nil && *logFormat != "" {
			if _, err = itemize.ParseFormat(*logFormat); err == nil {
				c.LogFileFormat = *logFormat // after Check: this host has no --log-file of its own
			}
		}
		if err != nil {
			termsafe.Errorf(x.stderr, "%s: %v", wire.CmdR2RSend, err)
			return exitUsage
		}
		// The control host stops it: a graceful stop comes on stdin, and
		// the end of stdin (the control host gone) stops it at once.
		ctx, stop := signalContext()
		defer stop()
		limit, stopLimit := bwSignals()
		defer stopLimit()
		out := &lineWriter{w: x.stdout}
		s := engine.R2RSender{Config: c, Src: x.args[0], Dst: x.args[1], Stdin: x.stdin, Stdout: out, Stderr: x.stderr, ExitCode: exitCode, Limit: limit,
			Progress: r2rProgress, Verify: *verify, Log: *log}
		o := s.Run(ctx)
		out.Flush()
		return exitCode(o)
	}
}

// r2rEvery is how often box1 tells the control host the progress.
const r2rEvery = 250 * time.Millisecond

// r2rProgress sends the progress line's figures every r2rEvery, smoothed
// as this host's display smooths them.
func r2rProgress(m *metrics.Job, send func(progressline.Job)) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r2rEvery)
		defer t.Stop()
		s := newSmoother()
		for {
			select {
			case <-ctx.Done():
				send(s.job(m, time.Now()))
				return
			case <-t.C:
				send(s.job(m, time.Now()))
			}
		}
	}()
	return func() { cancel(); <-done }
}

// remoteProgress draws the progress a remote-to-remote move's box1 sends
// (engine.Job.RemoteProgress): on a terminal (tw) as the job's own
// display, else with -v a plain line every logEvery; nil for neither.
func remoteProgress(tw *ttyWriter, stderr io.Writer, verbose bool) func() (func(progressline.Job), func()) {
	if tw == nil && !verbose {
		return nil
	}
	return func() (func(progressline.Job), func()) {
		if tw != nil {
			return func(p progressline.Job) {
				cols, _ := tw.dims()
				tw.draw([]string{progressline.Line(p, cols)})
			}, tw.stop
		}
		var last time.Time
		return func(p progressline.Job) {
			if time.Since(last) >= logEvery {
				last = time.Now()
				termsafe.Errorf(stderr, "%s", progressline.Line(p, 0))
			}
		}, func() {}
	}
}

// lineWriter passes whole lines to w, one Write at a time: the job's
// output and the lines for the control host share box1's stdout.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		_, err := l.w.Write(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what is left, a last line without its newline.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.w.Write(l.buf)
		l.buf = nil
	}
}
