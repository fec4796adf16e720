package itemize

import (
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/model"
)

// TestFormatEscapes: each escape of --out-format, with widths and
// apostrophes as rsync writes them.
func TestFormatEscapes(t *testing.T) {
	mtime := time.Date(2030, 1, 2, 3, 4, 5, 0, time.Local)
	e := &model.Entry{Path: "sub/big", Kind: model.KindFile, Size: 1234567, Mode: 0o4750 | fs.ModeSetuid, MTime: mtime.UnixNano(), UID: 1001, GID: 50}
	r := &Record{Entry: e, Code: ">f+++++++++", Op: "send", Sent: 1234567, Full: "src/sub/big", Time: mtime}
	for _, c := range []struct{ format, want string }{
		{"%i %n%L", ">f+++++++++ sub/big"},
		{"%o %n %l %b", "send sub/big 1234567 1234567"},
		{"%'l|%''l|%'''l", "1,234,567|1.23M|1.18M"},
		{"[%-10n][%10l][%3o]", "[sub/big   ][   1234567][send]"},
		{"%f %M %B %U:%G", "src/sub/big 2030/01/02-03:04:05 rwsr-x--- 1001:50"},
		{"%t", "2030/01/02 03:04:05"},
		{"100%% %p", "100% " + strconv.Itoa(os.Getpid())},
		{"plain", "plain"},
	} {
		f, err := ParseFormat(c.format)
		if err != nil {
			t.Fatalf("%q: %v", c.format, err)
		}
		if got := f.Line(r); got != c.want {
			t.Errorf("%q: %q, want %q", c.format, got, c.want)
		}
	}
	l := &model.Entry{Path: "l", Kind: model.KindSymlink, Link: "target", Mode: 0o777}
	f, _ := ParseFormat("%n%L %l %B %b")
	if got := f.Line(&Record{Entry: l, Code: "cL+++++++++"}); got != "l -> target 6 rwxrwxrwx 0" {
		t.Errorf("a symlink: %q", got)
	}
	if got := Perms(&model.Entry{Kind: model.KindDir, Mode: 0o1755 | fs.ModeSticky}); got != "rwxr-xr-t" {
		t.Errorf("sticky directory: %q", got)
	}
}

// TestFormatErrors: an escape bulkmove does not know, or one of rsync's
// that it does not have, is refused and named.
func TestFormatErrors(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{"%q", "unknown escape %q"},
		{"%n %10z", "unknown escape %10z"},
		{"%a", "escape %a is the remote IP"},
		{"%C", "whole-file checksum"},
		{"50%", "ends in the middle of an escape (%)"},
	} {
		_, err := ParseFormat(c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.format, err, c.want)
		}
	}
}

// TestShows: which entries get a line, as rsync decides: with %i every
// change; without, data sent, what is made in place, directories, and
// deletions, but not a file whose attributes alone were set.
func TestShows(t *testing.T) {
	withI, _ := ParseFormat("%i %n")
	without, _ := ParseFormat("%n")
	file := &model.Entry{Path: "f", Kind: model.KindFile}
	dir := &model.Entry{Path: "d", Kind: model.KindDir}
	link := &model.Entry{Path: "l", Kind: model.KindSymlink}
	for _, c := range []struct {
		r              Record
		withI, without bool
	}{
		{Record{Entry: file, Code: ">f+++++++++"}, true, true},
		{Record{Entry: file, Code: ".f...p....."}, true, false},
		{Record{Entry: dir, Code: ".d..t......"}, true, true},
		{Record{Entry: link, Code: "cL+++++++++"}, true, true},
		{Record{Entry: link, Code: ".L..t......"}, true, false},
		{Record{Entry: file, Code: Deleted}, true, true},
		{Record{Entry: file, Code: ""}, false, false},
	} {
		if got := withI.Shows(&c.r); got != c.withI {
			t.Errorf("%s %s with %%i: %v, want %v", c.r.Code, c.r.Entry.Path, got, c.withI)
		}
		if got := without.Shows(&c.r); got != c.without {
			t.Errorf("%s %s without %%i: %v, want %v", c.r.Code, c.r.Entry.Path, got, c.without)
		}
	}
}
