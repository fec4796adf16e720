package engine

// --backup (-b), --backup-dir and --suffix: what a pass replaces or
// deletes at DEST is moved aside there, with rsync's semantics: without
// --backup-dir renamed to its name plus the suffix ("~") in its directory,
// with it (which implies --backup) moved to DIR/its path plus the suffix
// (""). A relative DIR is beneath DEST; an absolute one is on the
// receiving host. The receiver does it (receive/extract's backup.go) and
// names in its acks what it moved aside (wire.BatchAck.Backups,
// wire.PrunedEntry.Backup); the job counts them for the summary and
// writes "backed up NAME to WHERE" in --log-file.
//
// rsync's --delete-WHEN options (--del, --delete-before, --delete-during,
// --delete-delay, --delete-after) imply --delete and are accepted: a
// bulkmove pass always deletes after the transfer, once nothing failed.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/wire"
)

// Backup is --backup, --backup-dir and --suffix.
type Backup struct {
	On  bool   `json:"on,omitempty"`
	Dir string `json:"dir,omitempty"`
	// Suffix is --suffix's value, nil where it is not given: rsync's
	// default then, "~" without Dir, "" with it.
	Suffix *string `json:"suffix,omitempty"`
}

// DeleteWhen is rsync's --delete-WHEN flags: each implies --delete; at
// most one WHEN may be given, as rsync has it (--del is --delete-during).
type DeleteWhen struct {
	Before, During, Delay, After bool
}

// suffix is the suffix in force.
func (b *Backup) suffix() string {
	switch {
	case b.Suffix != nil:
		return *b.Suffix
	case b.Dir != "":
		return ""
	}
	return "~"
}

// check validates the backup flags with rsync's messages, and settles
// what one implies (--backup-dir is --backup).
func (b *Backup) check() error {
	if b.Dir != "" {
		b.On = true
	}
	if !b.On {
		return nil
	}
	s := b.suffix()
	if strings.Contains(s, "/") {
		return fmt.Errorf("--suffix cannot contain slashes: %s", s)
	}
	if s == "" && (b.Dir == "" || strings.Trim(b.Dir, "./") == "" && !strings.HasPrefix(b.Dir, "/")) {
		return errors.New("--suffix cannot be empty without a --backup-dir other than DEST")
	}
	if strings.HasPrefix(b.Dir, "..") || strings.Contains(b.Dir, "/../") || strings.HasSuffix(b.Dir, "/..") {
		return fmt.Errorf("--backup-dir %s: a relative backup directory must be beneath DEST (no \"..\"); give an absolute one for elsewhere on the receiving host", b.Dir)
	}
	return nil
}

// receive sets the receive options of the backups.
func (b *Backup) receive(o *wire.ReceiveOptions) {
	if b.On {
		o.Backup, o.BackupDir, o.Suffix = true, b.Dir, b.suffix()
	}
}

// check settles --delete from the WHEN flags.
func (w DeleteWhen) check(c *Config) error {
	n := 0
	for _, on := range []bool{w.Before, w.During, w.Delay, w.After} {
		if on {
			n++
		}
	}
	if n > 1 {
		return errors.New("you may not combine multiple --delete-WHEN options")
	}
	if n > 0 {
		c.Delete = true
	}
	return nil
}

// backupPath is where the receiver moves p (under DEST) with --backup.
func (j *job) backupPath(p string) string {
	var o wire.ReceiveOptions
	j.flags.Backup.receive(&o)
	return o.BackupPath(p)
}

// noteBackups tells of each entry the ack says its batch moved aside
// (noteBackup), and, with -v, how many more there were than it names.
func (j *job) noteBackups(a *wire.BatchAck) {
	for _, p := range a.Backups {
		j.noteBackup(p)
	}
	if more := a.BackedUp - int64(len(a.Backups)); more > 0 {
		if j.flags.Verbose {
			termsafe.Errorf(j.stderr, "backed up %d more entries of batch %d", more, a.ID)
		}
		j.logBackedUpMore(more, a.ID)
	}
}

// noteBackup tells of p (under DEST), moved aside: rsync's -vv line,
// "backed up NAME to WHERE", with -v, and the cutover log's.
func (j *job) noteBackup(p string) {
	to := j.backupPath(p)
	if j.flags.Verbose {
		termsafe.Errorf(j.stderr, "backed up %s to %s", p, to)
	}
	j.logBackedUp(p, to)
}
