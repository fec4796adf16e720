package extract_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/wire"
)

// checkTree lays out a destination for the check modes: each name is a
// case, the entry the sender declares for it and what DEST holds.
type checkCase struct {
	name  string
	entry model.Entry
	sum   wire.Sum // the sender's content hash; zero: none
	// DEST: a regular file of content with mtime and mode (0: 0644), or
	// a symlink (link), a directory (dir), or nothing (missing).
	content string
	mtime   int64
	mode    os.FileMode
	link    string
	dir     bool
	missing bool
}

func abcSum() wire.Sum { return wire.HashBytes([]byte("abc")) }

func checkCases() []checkCase {
	f := func(name string) model.Entry { return fileE(name, 3) }
	older := mtime - int64(time.Hour)
	return []checkCase{
		{name: "same", entry: f("same"), sum: abcSum(), content: "abc", mtime: mtime},
		{name: "samesize", entry: f("samesize"), sum: abcSum(), content: "xyz", mtime: mtime},
		{name: "older", entry: f("older"), sum: abcSum(), content: "abc", mtime: older},
		{name: "older-other", entry: f("older-other"), sum: abcSum(), content: "xyz", mtime: older},
		{name: "chmod", entry: f("chmod"), sum: abcSum(), content: "abc", mtime: mtime, mode: 0o600},
		{name: "bigger", entry: f("bigger"), sum: abcSum(), content: "abcd", mtime: mtime},
		{name: "nosum", entry: f("nosum"), content: "abc", mtime: mtime},
		{name: "empty", entry: fileE("empty", 0), sum: wire.EmptySum, mtime: older},
		{name: "link", entry: f("link"), sum: abcSum(), link: "same"},
		{name: "dir", entry: f("dir"), sum: abcSum(), dir: true},
		{name: "missing", entry: f("missing"), sum: abcSum(), missing: true},
		{name: "sub/deep", entry: f("sub/deep"), sum: abcSum(), content: "abc", mtime: older},
	}
}

func layCheckTree(t *testing.T, root string, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		p := filepath.Join(root, filepath.FromSlash(c.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case c.missing:
			continue
		case c.dir:
			err = os.Mkdir(p, 0o755)
		case c.link != "":
			err = os.Symlink(c.link, p)
		default:
			mode := c.mode
			if mode == 0 {
				mode = 0o644
			}
			if err = os.WriteFile(p, []byte(c.content), mode); err == nil {
				err = os.Chmod(p, mode)
			}
			if err == nil {
				tm := time.Unix(0, c.mtime)
				err = os.Chtimes(p, tm, tm)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Each check mode decides as rsync's flag of the same meaning: same size
// and other content is needed by checksum only; size-only ignores mtimes;
// ignore-existing skips any existing file; a name of another type (a
// symlink, a directory) or a missing one is always needed.
func TestCheckModes(t *testing.T) {
	needed := map[string][]string{
		wire.CheckQuick:    {"older", "older-other", "bigger", "empty", "sub/deep", "link", "dir", "missing"},
		wire.CheckSize:     {"bigger", "link", "dir", "missing"},
		wire.CheckSum:      {"samesize", "older-other", "bigger", "nosum", "link", "dir", "missing"},
		wire.CheckExisting: {"link", "dir", "missing"},
		wire.CheckNone:     {"same", "samesize", "older", "older-other", "chmod", "bigger", "nosum", "empty", "sub/deep", "link", "dir", "missing"},
	}
	for mode, want := range needed {
		t.Run(mode, func(t *testing.T) {
			s := newSandbox(t)
			cases := checkCases()
			layCheckTree(t, s.root, cases)
			r := s.open(t, extract.Options{Check: mode})
			if got := r.Checksums(); got != (mode == wire.CheckSum) {
				t.Errorf("Checksums() = %v", got)
			}
			m := &wire.BatchManifest{ID: 1}
			for _, c := range cases {
				m.Entries = append(m.Entries, c.entry)
				m.Sums = append(m.Sums, c.sum)
			}
			// Other kinds are always needed: they are applied, not sent.
			m.Entries = append(m.Entries, dirE("sub", 0o755), symE("same", "x"))
			need := r.NeedSums(m.Entries, m.Sums)
			wantSet := map[string]bool{}
			for _, w := range want {
				wantSet[w] = true
			}
			for i, c := range cases {
				if need[i] != wantSet[c.name] {
					t.Errorf("%s: need %v, want %v", c.name, need[i], wantSet[c.name])
				}
			}
			for i := len(cases); i < len(m.Entries); i++ {
				if !need[i] {
					t.Errorf("%s %s: not needed", m.Entries[i].Kind, m.Entries[i].Path)
				}
			}
			// Quick, size-only and checksum give an up-to-date file the
			// entry's mtime and mode (quick: the mode, its mtime agrees),
			// without its data, as rsync -a does; ignore-existing leaves
			// it alone; content is never touched by Need.
			fixes := mode == wire.CheckQuick || mode == wire.CheckSize || mode == wire.CheckSum
			for _, c := range cases {
				if c.link != "" || c.dir || c.missing {
					continue
				}
				p := filepath.Join(s.root, filepath.FromSlash(c.name))
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(p); string(b) != c.content {
					t.Errorf("%s: content %q, want %q untouched", c.name, b, c.content)
				}
				wantMtime, wantMode := c.mtime, c.mode
				if wantMode == 0 {
					wantMode = 0o644
				}
				if fixes && !wantSet[c.name] {
					wantMtime, wantMode = c.entry.MTime, c.entry.Mode
				}
				if got := fi.ModTime().UnixNano(); got != wantMtime {
					t.Errorf("%s: mtime %d, want %d", c.name, got, wantMtime)
				}
				if fi.Mode().Perm() != wantMode.Perm() {
					t.Errorf("%s: mode %v, want %v", c.name, fi.Mode().Perm(), wantMode.Perm())
				}
			}
			s.check(t)
		})
	}
}

// In checksum mode a file the receiver cannot read is needed, and one
// whose sum the sender could not compute (zero Sum, or no Sums) too.
func TestChecksumUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a 0000 file")
	}
	s := newSandbox(t)
	cases := []checkCase{{name: "locked", entry: fileE("locked", 3), sum: abcSum(), content: "abc", mtime: mtime, mode: 0o200}}
	layCheckTree(t, s.root, cases)
	r := s.open(t, extract.Options{Check: wire.CheckSum})
	if need := r.NeedSums([]model.Entry{cases[0].entry}, []wire.Sum{abcSum()}); !need[0] {
		t.Error("an unreadable file is not needed")
	}
}

// Many files of a batch are hashed at once, each answer at its index.
func TestChecksumMany(t *testing.T) {
	s := newSandbox(t)
	var cases []checkCase
	var sums []wire.Sum
	for i := range 200 {
		name := fmt.Sprintf("d%d/f%03d", i%7, i)
		content := fmt.Sprintf("content %03d", i)
		sum := wire.HashBytes([]byte(content))
		if i%3 == 0 {
			content = fmt.Sprintf("CONTENT %03d", i) // same size, other bytes
		}
		e := fileE(name, int64(len(content)))
		cases = append(cases, checkCase{name: name, entry: e, content: content, mtime: mtime})
		sums = append(sums, sum)
	}
	layCheckTree(t, s.root, cases)
	r := s.open(t, extract.Options{Check: wire.CheckSum})
	var entries []model.Entry
	for _, c := range cases {
		entries = append(entries, c.entry)
	}
	need := r.NeedSums(entries, sums)
	for i := range need {
		if need[i] != (i%3 == 0) {
			t.Errorf("%s: need %v", cases[i].name, need[i])
		}
	}
	// Without sums (a sender that sent none) every file is needed.
	for i, n := range r.NeedSums(entries, nil) {
		if !n {
			t.Errorf("%s: not needed without a sum", cases[i].name)
		}
	}
}

// --ignore-existing leaves an existing symlink (whatever its target) and
// an existing file at a hard link's name alone; elsewhere they are made.
func TestIgnoreExistingLinks(t *testing.T) {
	s := newSandbox(t)
	r := s.open(t, extract.Options{Check: wire.CheckExisting})
	f := fileE("f", 3)
	f.Nlink = 2
	mustReceive(t, r, &wire.BatchManifest{ID: 1, Entries: []model.Entry{f}}, tarOf(t, 1, tf("f", "abc")))
	if err := os.Symlink("elsewhere", filepath.Join(s.root, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, "h"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	ack := mustReceive(t, r, &wire.BatchManifest{ID: 2, Flags: wire.FlagFinal,
		Entries: []model.Entry{symE("l", "f"), symE("l2", "f"), hardE("h", "f"), hardE("h2", "f")}}, nil)
	if ack.Skipped != 2 || ack.Files != 2 {
		t.Errorf("ack %+v, want 2 skipped and 2 made", ack)
	}
	if got, _ := os.Readlink(filepath.Join(s.root, "l")); got != "elsewhere" {
		t.Errorf("l -> %q, want the existing elsewhere", got)
	}
	if got, _ := os.Readlink(filepath.Join(s.root, "l2")); got != "f" {
		t.Errorf("l2 -> %q, want f", got)
	}
	if b, _ := os.ReadFile(filepath.Join(s.root, "h")); string(b) != "other" {
		t.Errorf("h holds %q, want the existing file", b)
	}
	fi, _ := os.Stat(filepath.Join(s.root, "f"))
	if hi, err := os.Stat(filepath.Join(s.root, "h2")); err != nil || !os.SameFile(fi, hi) {
		t.Errorf("h2 is not a hard link to f (%v)", err)
	}
	s.check(t)
}

// A receiver refuses a check mode it does not know (a newer sender's).
func TestUnknownCheckMode(t *testing.T) {
	s := newSandbox(t)
	if r, err := extract.Open(s.root, extract.Options{Check: "mtime-only"}); err == nil {
		r.Close()
		t.Fatal("an unknown check mode was accepted")
	}
	if o := extract.FromWire(&wire.ReceiveOptions{Check: wire.CheckSum}); o.Check != wire.CheckSum || o.NoCheck {
		t.Errorf("FromWire: %+v", o)
	}
	if o := extract.FromWire(&wire.ReceiveOptions{Check: wire.CheckNone}); !o.NoCheck {
		t.Errorf("FromWire: %+v", o)
	}
}

// CheckName refuses a component over 255 bytes wherever it stands, and
// takes one of 255 anywhere.
func TestCheckNameComponents(t *testing.T) {
	c255, c256 := strings.Repeat("c", 255), strings.Repeat("c", 256)
	for p, ok := range map[string]bool{
		c255: true, "a/" + c255: true, c255 + "/b": true, c255 + "/" + c255 + "/" + c255: true,
		c256: false, "a/" + c256: false, c256 + "/b": false, "a/" + c256 + "/b": false,
	} {
		if err := extract.CheckName(p, model.KindFile); (err == nil) != ok {
			t.Errorf("CheckName(%d bytes, components %v) = %v, want ok %v", len(p), componentLens(p), err, ok)
		}
	}
}

func componentLens(p string) []int {
	var n []int
	for _, c := range strings.Split(p, "/") {
		n = append(n, len(c))
	}
	return n
}
