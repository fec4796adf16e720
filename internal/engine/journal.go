package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bulkmove/bulkmove/internal/engine/resume"
	"github.com/bulkmove/bulkmove/journal"
)

// openJournal opens the job's journal: --journal PATH, none for no
// journal, or by default one under the user's state directory keyed by
// SRC, DEST and the options that change what moves.
func (j *job) openJournal() (*resume.Journal, error) {
	p := j.flags.Journal
	if p == "none" || j.hub != nil {
		return nil, nil
	}
	if p == "" {
		dst := j.dst
		if j.remote == nil {
			if abs, err := filepath.Abs(dst); err == nil {
				dst = abs
			}
		}
		ro := j.receiveOptions()
		var err error
		key := append([]string{"check=" + ro.Check, fmt.Sprintf("setid=%v", ro.KeepSetid),
			"rules=" + strings.Join(j.flags.Rules.List(), "\x00")}, j.flags.Scale.journalKey()...)
		if !ro.Owner {
			key = append(key, "owner=false")
		}
		if read, _ := j.fakeSuper(); read || ro.FakeSuper {
			// Another tree at DEST, another SRC read: not the same job.
			key = append(key, fmt.Sprintf("fake-super=%v,%v", read, ro.FakeSuper))
		}
		p, err = journal.DefaultPath(j.src, dst, key...)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if n, err := EnvCount("BULKMOVE_TUNE_JOURNAL_MEM", "files"); err != nil {
		return nil, err
	} else if n > 0 {
		journal.MemEntries = n
	}
	return resume.Open(p, j.flags.Journal != "", j.stderr)
}

// EnvCount reads a count from the environment variable name: 0 if it is
// not set, an error naming what it counts if it is not a positive number.
func EnvCount(name, what string) (int64, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a number of %s, at least 1", name, v, what)
	}
	return n, nil
}
