package extract_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// TestConcurrentReceiver: a receiver writing many files at once (the
// setting for a slow destination filesystem) keeps the order that matters:
// directories exist before the files created in them, a directory that
// ends up read-only still receives its files, symlinks are created after
// the data, and every directory's mode and mtime are set after all that is
// created inside it; also with the batch's files taking their directories
// in turn (spread, as a sender cuts them for a slow destination: created
// in place, many in one directory at once). Run it with -race.
func TestConcurrentReceiver(t *testing.T) {
	for _, c := range []struct{ named, spread bool }{{false, false}, {true, false}, {false, true}} {
		named := c.named
		t.Run(fmt.Sprintf("named-temps=%v,spread=%v", named, c.spread), func(t *testing.T) {
			s := newSandbox(t)
			r := s.open(t, extract.Options{IOConcurrency: 16, NamedTemps: named})
			var entries []model.Entry
			var files []tarFile
			content := map[string]string{}
			add := func(p, data string) {
				e := fileE(p, int64(len(data)))
				e.Mode = fs.FileMode(0o600 + len(entries)%3*0o44)
				e.MTime = mtime + int64(len(entries))*1_000_003
				entries = append(entries, e)
				files = append(files, tf(p, data))
				content[p] = data
			}
			for d := range 8 {
				for sd := range 3 {
					for i := range 20 {
						add(fmt.Sprintf("d%d/s%d/f%02d", d, sd, i), strings.Repeat(fmt.Sprint(d, sd, i), i*50))
					}
				}
			}
			add("d0/big", strings.Repeat("B", 300<<10)) // larger than a writer's buffer: written inline
			for i := range 30 {
				add(fmt.Sprintf("ro/f%02d", i), fmt.Sprint("read-only dir file ", i))
			}
			if c.spread {
				entries, files = inTurn(entries, files)
			}
			m := &wire.BatchManifest{ID: 1, Entries: entries}
			ack := mustReceive(t, r, m, tarOf(t, 1, files...))
			if ack.Files != int64(len(entries)) {
				t.Fatalf("ack counts %d files, want %d", ack.Files, len(entries))
			}

			// The final batch: symlinks, then directories deepest first.
			var final []model.Entry
			for d := range 8 {
				l := symE(fmt.Sprintf("d%d/s1/link", d), "f00")
				l.MTime = mtime + 7
				final = append(final, l, symE(fmt.Sprintf("d%d/up", d), "s2"))
			}
			var dirs []model.Entry
			for d := range 8 {
				for sd := range 3 {
					e := dirE(fmt.Sprintf("d%d/s%d", d, sd), 0o750)
					e.MTime = mtime + int64(100+d*3+sd)
					dirs = append(dirs, e)
				}
			}
			for d := range 8 {
				e := dirE(fmt.Sprintf("d%d", d), 0o755)
				e.MTime = mtime + int64(200+d)
				dirs = append(dirs, e)
			}
			ro := dirE("ro", 0o555)
			ro.MTime = mtime + 300
			top := dirE(".", 0o751)
			top.MTime = mtime + 400
			dirs = append(dirs, ro, top)
			final = append(final, dirs...)
			ack = mustReceive(t, r, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal, Entries: final}, nil)
			if ack.Files != int64(len(final)) {
				t.Errorf("final ack counts %d, want %d", ack.Files, len(final))
			}
			for _, e := range entries {
				checkFile(t, s.root, e, content[e.Path])
			}
			for _, e := range final[:16] {
				got, err := os.Readlink(filepath.Join(s.root, e.Path))
				if err != nil || got != e.Link {
					t.Errorf("%s -> %q (%v), want %q", e.Path, got, err, e.Link)
				}
			}
			for _, d := range dirs {
				checkDir(t, s.root, d) // a wrong mtime: something was created in it after its metadata
			}

			// A second pass finds everything in place, checking many at once.
			need := r.Need(entries)
			for i, n := range need {
				if n {
					t.Errorf("%s needed again after it landed", entries[i].Path)
				}
			}
			s.check(t)
		})
	}
}

// inTurn reorders a batch's entries (and their tar files alike) so that
// they take their directories in turn, one file of each.
func inTurn(entries []model.Entry, files []tarFile) ([]model.Entry, []tarFile) {
	var dirs []string
	by := map[string][]int{}
	for i, e := range entries {
		d := filepath.Dir(e.Path)
		if by[d] == nil {
			dirs = append(dirs, d)
		}
		by[d] = append(by[d], i)
	}
	var es []model.Entry
	var tfs []tarFile
	for k := 0; len(es) < len(entries); k++ {
		for _, d := range dirs {
			if k < len(by[d]) {
				es = append(es, entries[by[d][k]])
				tfs = append(tfs, files[by[d][k]])
			}
		}
	}
	return es, tfs
}

// TestFinalDirsMadeBeforeMeta: a final batch's directories are all made
// (an empty directory exists only there) before any gets its mode and
// mtime, so that making one never moves its parent's mtime, even listed
// after it; on a slow filesystem they are applied at once rather than one
// depth at a time.
func TestFinalDirsMadeBeforeMeta(t *testing.T) {
	for _, width := range []int{1, 16} {
		t.Run(fmt.Sprintf("io=%d", width), func(t *testing.T) {
			s := newSandbox(t)
			r := s.open(t, extract.Options{IOConcurrency: width})
			// Shallowest first: each directory's child is made after it.
			var dirs []model.Entry
			p := ""
			for d := range 6 {
				p = strings.TrimPrefix(p+"/e"+fmt.Sprint(d), "/")
				e := dirE(p, []fs.FileMode{0o755, 0o750, 0o700}[d%3])
				e.MTime = mtime + int64(d)*1_000_000_007
				dirs = append(dirs, e)
			}
			ack := mustReceive(t, r, &wire.BatchManifest{ID: 1, Flags: wire.FlagFinal, Entries: dirs}, nil)
			if ack.Files != int64(len(dirs)) || len(ack.Errors) != 0 {
				t.Fatalf("ack: %d applied, errors %v", ack.Files, ack.Errors)
			}
			for _, d := range dirs {
				checkDir(t, s.root, d)
			}
		})
	}
}
