package engine

import (
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"github.com/bulkmove/bulkmove/internal/batchname"
	"github.com/bulkmove/bulkmove/internal/itemize"
	"github.com/bulkmove/bulkmove/internal/termsafe"
)

// The cutover log (--log-file): what cmd/bulkmove heads and ends with the
// pass's command line and outcome, the engine fills with a line per
// entry created, changed, deleted, backed up or failed: rsync's
// --log-file lines ('%i %n%L', or --log-file-format's), the failures
// with their cause, the backups as rsync's -vv names them. Logged
// counts them for the pass's footer.

// Logged counts what a pass's log lines recorded; cmd/bulkmove writes it
// in the pass's footer. Created counts the entries new at DEST (the
// '+++++++++' items), Changed the others with an item line, Bytes the
// data sent of the files among them.
type Logged struct {
	mu                                          sync.Mutex
	Created, Changed, Deleted, BackedUp, Failed int64
	Bytes                                       int64
}

// FailedCode is the code column of a failed entry's line: 11 wide, as
// rsync's "*deleting  ".
const FailedCode = "*failed    "

func (l *Logged) add(f func(*Logged)) {
	if l == nil {
		return
	}
	l.mu.Lock()
	f(l)
	l.mu.Unlock()
}

// Totals is a copy of l's counts, safe to read once the job is over.
func (l *Logged) Totals() (created, changed, deleted, backedUp, failed, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Created, l.Changed, l.Deleted, l.BackedUp, l.Failed, l.Bytes
}

// logItem counts rec, an item line of the log (showItem).
func (j *job) logItem(rec *itemize.Record) {
	j.logged.add(func(l *Logged) {
		switch {
		case rec.Code == itemize.Deleted:
			l.Deleted++
		case strings.HasSuffix(rec.Code, "+++++++++"):
			l.Created++
		default:
			l.Changed++
		}
		l.Bytes += rec.Sent
	})
}

// logFailed writes the log's line for an entry (path relative to SRC)
// that could not be moved, with the cause as stderr said it. Under j.mu
// or not: the log takes a line in one write.
func (j *job) logFailed(path string, cause error) {
	if j.logFmt == nil {
		return
	}
	msg := cause.Error()
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		// "open: permission denied": the name is the line's already.
		msg = pe.Op + ": " + pe.Err.Error()
	} else {
		msg = withoutPath(msg, path)
	}
	j.logged.add(func(l *Logged) { l.Failed++ })
	io.WriteString(j.log, FailedCode+" "+termsafe.Escape(path)+": "+termsafe.Escape(msg)+"\n")
}

// logDeleteFailed writes the log's line for an entry --delete could not
// remove, from the receiver's message: "delete NAME: CAUSE" as
// "NAME: delete: CAUSE"; a message that names no entry (a directory it
// could not list: "delete in DIR: ...") as it is.
func (j *job) logDeleteFailed(msg string) {
	if j.logFmt == nil {
		return
	}
	if rest, ok := strings.CutPrefix(msg, "delete "); ok && !strings.HasPrefix(rest, "in ") {
		if name, cause, ok := strings.Cut(rest, ": "); ok {
			j.logFailed(name, errors.New("delete: "+cause))
			return
		}
	}
	j.logged.add(func(l *Logged) { l.Failed++ })
	io.WriteString(j.log, FailedCode+" "+termsafe.Escape(msg)+"\n")
}

// logFailedMsg is logFailed for a receiver's report, a message.
func (j *job) logFailedMsg(path, msg string) {
	j.logFailed(path, errors.New(msg))
}

// logBackedUp writes the log's line for an entry a pass moved aside
// before overwriting or deleting it (--backup, --backup-dir): name is its
// path under DEST, to where it went (BackupPath: under DEST, or under an
// absolute --backup-dir as given), as rsync's -vv says it: "backed up
// NAME to TO"; and counts it.
func (j *job) logBackedUp(name, to string) {
	if j.logFmt == nil {
		return
	}
	j.logged.add(func(l *Logged) { l.BackedUp++ })
	io.WriteString(j.log, "backed up "+termsafe.Escape(name)+" to "+termsafe.Escape(to)+"\n")
}

// logBackedUpMore writes the log's line for the n entries of batch id
// moved aside beyond those its ack names (wire.MaxAckBackups), and
// counts them.
func (j *job) logBackedUpMore(n int64, id uint64) {
	if j.logFmt == nil {
		return
	}
	j.logged.add(func(l *Logged) { l.BackedUp += n })
	io.WriteString(j.log, "backed up "+strconv.FormatInt(n, 10)+" more entries of batch "+batchname.Name(id)+", not named by the receiver\n")
}

// withoutPath takes out of msg the word naming the entry path (SRC's or
// DEST's full path to it: "read /src/d/f: permission denied" says
// "read: permission denied" in d/f's line). msg without it is as it is.
func withoutPath(msg, path string) string {
	i := strings.Index(msg, path+": ")
	if i < 0 || (i > 0 && msg[i-1] != '/' && msg[i-1] != ' ') {
		return msg
	}
	start := strings.LastIndexByte(msg[:i], ' ') + 1
	rest := msg[i+len(path):] // ": cause"
	if start == 0 {
		return strings.TrimPrefix(rest, ": ")
	}
	return msg[:start-1] + rest
}
