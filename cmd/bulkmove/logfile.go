package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// logFile is --log-file: every line bulkmove writes on stderr, appended
// to a file with a timestamp (progress redraws left out); at --log-level
// debug also the -v phase lines, with or without -v.
type logFile struct {
	mu    sync.Mutex
	f     *os.File
	debug bool
	part  []byte
}

// logFileMode is a new --log-file's mode.
const logFileMode = 0o600

func openLog(path, level string) (*logFile, error) {
	switch level {
	case "info", "debug":
	default:
		return nil, fmt.Errorf("--log-level %q: want info or debug", level)
	}
	// 0600: the log names the files moved and the hosts; a file that
	// exists keeps its mode (an operator may share it with a group).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, logFileMode)
	if err != nil {
		return nil, fmt.Errorf("--log-file: %w", err)
	}
	return &logFile{f: f, debug: level == "debug"}, nil
}

// Write implements io.Writer, line by line.
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		line := l.part[:i]
		l.part = l.part[i+1:]
		if bytes.ContainsAny(line, "\r\x1b") {
			continue // a progress line redrawn on a terminal
		}
		// What bulkmove writes is escaped already (termsafe.Printf); Sanitize
		// keeps anything else that gets here from putting a control
		// character in the log.
		fmt.Fprintf(l.f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), termsafe.Sanitize(string(line)))
	}
	return len(p), nil
}

func (l *logFile) Close() error {
	if len(l.part) > 0 {
		l.Write([]byte("\n"))
	}
	return l.f.Close()
}

// teeLog sends what goes to w to the log too.
func teeLog(w io.Writer, l *logFile) io.Writer {
	if l == nil {
		return w
	}
	return io.MultiWriter(w, l)
}
