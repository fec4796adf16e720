package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulkmove/bulkmove/internal/engine"
	"github.com/bulkmove/bulkmove/internal/shell"
	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/internal/units"
	"github.com/bulkmove/bulkmove/wire"
)

// logFile is --log-file, a cutover's record: each pass appends a header
// (the command line, the version, SRC and DEST, the start), a line per
// entry created, changed, deleted, backed up or failed (the engine's,
// rsync's '%i %n%L' by default), every line bulkmove writes on stderr
// (progress redraws left out; at --log-level debug also the -v phase
// lines, with or without -v), and a footer (the end, the exit code and
// what it means, the counts). Every line has rsync's prefix,
// "YYYY/MM/DD HH:MM:SS [PID] ", and goes in one write(2) to a file opened
// O_APPEND: the K streams' lines, and two passes writing at once, never
// cut into each other.
type logFile struct {
	mu     sync.Mutex
	f      *os.File
	debug  bool
	part   []byte
	prefix func() string
}

// logFileMode is a new --log-file's mode.
const logFileMode = 0o600

// openLog opens --log-file for appending. Like rsync it follows a
// symlink at the path (a log kept elsewhere), but never truncates: what
// earlier passes wrote stays. A symlink planted in a sticky
// world-writable directory (/tmp) by another user is refused by the
// kernel (fs.protected_symlinks) before bulkmove sees it.
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
	pid := " [" + strconv.Itoa(os.Getpid()) + "] "
	return &logFile{f: f, debug: level == "debug", prefix: func() string {
		return time.Now().Format("2006/01/02 15:04:05") + pid
	}}, nil
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
		// What bulkmove writes is escaped already (termsafe.Printf,
		// itemize's lines); Sanitize keeps anything else that gets here
		// from putting a control character in the log. One write a line.
		l.f.WriteString(l.prefix() + termsafe.Sanitize(string(line)) + "\n")
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

// header starts a pass in the log: when, the version, the command line
// (quoted to be run again, secrets redacted) and the flags that
// BULKMOVE_* variables and the config file set, where it ran, SRC and
// DEST.
func (l *logFile) header(start time.Time, j *engine.Job, line, preset []string) {
	dry := ""
	if j.Config.DryRun {
		dry = " DRY RUN: nothing changed; the lines say what would be"
	}
	cwd, _ := os.Getwd()
	fmt.Fprintf(l, "=== bulkmove pass start %s%s\n", start.Format(time.RFC3339), dry)
	fmt.Fprintf(l, "version: bulkmove %s (protocol %d)\n", engine.Version, wire.Proto)
	fmt.Fprintf(l, "command: %s\n", commandText(line))
	if len(preset) > 0 {
		fmt.Fprintf(l, "preset: %s (from BULKMOVE_* variables and the config file)\n", strings.TrimPrefix(commandText(preset), "bulkmove "))
	}
	fmt.Fprintf(l, "cwd: %s\n", shell.Quote(cwd))
	fmt.Fprintf(l, "SRC: %s\n", shell.Quote(redact(j.Src)))
	fmt.Fprintf(l, "DEST: %s\n", shell.Quote(redact(j.Dst)))
}

// footer ends a pass in the log: the counts of its lines, the exit code
// and what it means, when.
func (l *logFile) footer(start time.Time, dry bool, code int, n *engine.Logged) {
	created, changed, deleted, backedUp, failed, sent := n.Totals()
	would, verb := "", "sent"
	if dry {
		would, verb = "would be ", "to send"
	}
	fmt.Fprintf(l, "totals: %s%d created, %d changed, %d deleted, %d backed up, %d failed; %s bytes of file data %s (%s)\n",
		would, created, changed, deleted, backedUp, failed, units.Count(sent), verb, units.Size(sent))
	end := time.Now()
	fmt.Fprintf(l, "=== bulkmove pass end %s after %s: exit %d (%s)\n",
		end.Format(time.RFC3339), end.Sub(start).Round(time.Millisecond), code, exitMeaning(code))
}

// exitMeaning is what an exit code says, as --help's table.
func exitMeaning(code int) string {
	switch code {
	case exitOK:
		return "done"
	case exitUsage:
		return "usage error"
	case exitPartial:
		return "partial: some entries failed, each named above"
	case exitFatal:
		return "fatal: the job could not be attempted or completed"
	case exitMaxDelete:
		return "--max-delete stopped the deletions"
	case exitInterrupted:
		return "interrupted by a signal"
	}
	return "unknown"
}

// commandText is the command line as a shell would run it again, with
// the secrets in it redacted.
func commandText(line []string) string {
	w := []string{"bulkmove"}
	for _, a := range line {
		w = append(w, shell.Quote(redact(a)))
	}
	return strings.Join(w, " ")
}

var (
	// A URL's password (a --pushgateway's basic auth): scheme://user:PASSWORD@.
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)[^@/\s]+@`)
	// sshpass -p PASSWORD in -e's command.
	sshpassPassword = regexp.MustCompile(`(\bsshpass\b.*?\s-p\s*)\S+`)
	// A word such as password=X or --token=X inside -e's command.
	namedSecret = regexp.MustCompile(`(?i)((?:password|passwd|passphrase|secret|token)[=:]\s*)\S+`)
)

// redacted stands for a secret in the log.
const redacted = "REDACTED"

// redact takes out of a word of the command line what is a secret:
// passwords in URLs and in -e's command. bulkmove's own flags take
// secrets from files (--control-token FILE, --token-file FILE), whose
// names are not secret.
func redact(a string) string {
	a = urlPassword.ReplaceAllString(a, "${1}"+redacted+"@")
	a = sshpassPassword.ReplaceAllString(a, "${1}"+redacted)
	if !strings.HasPrefix(a, "--") {
		a = namedSecret.ReplaceAllString(a, "${1}"+redacted)
	}
	return a
}
