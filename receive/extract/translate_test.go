package extract

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

// What a sender asks that does not parse, or names a group this receiver
// lacks, refuses the receiver before anything is written; where owners
// are not kept, maps change nothing and --chmod still applies.
func TestTranslatePolicy(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{UserMap: "alice"}, "--usermap"},
		{Options{Owner: true, GroupMap: "*:no-such-group-here"}, `no group "no-such-group-here" on the receiver`},
		{Options{Chmod: "u755"}, "--chmod"},
	} {
		r, err := Open(t.TempDir(), c.o)
		if err == nil {
			r.Close()
			t.Errorf("%+v: opened, want an error", c.o)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	r, err := Open(t.TempDir(), Options{UserMap: "*:0", ByName: true, Chmod: "F600"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e := []model.Entry{{Path: "a", Kind: model.KindFile, Mode: 0o644, UID: 5, GID: 6}}
	r.Translate(e, []wire.IDName{{ID: 5, Name: "root"}})
	if e[0].UID != 5 || e[0].GID != 6 || e[0].Mode != 0o600 {
		t.Errorf("owners not kept: %d:%d %v, want 5:6 -rw-------", e[0].UID, e[0].GID, e[0].Mode)
	}
}

// The sender's names match FROM names, first match wins, ids without a
// rule keep their number; symlinks keep their mode.
func TestTranslate(t *testing.T) {
	r, err := Open(t.TempDir(), Options{Owner: true, UserMap: "alice:7,1-3:8,:9", GroupMap: "0:4", Chmod: "D2775,F664"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Translating() {
		t.Fatal("not translating")
	}
	e := []model.Entry{
		{Path: "a", Kind: model.KindFile, Mode: 0o600, UID: 1001, GID: 0},
		{Path: "b", Kind: model.KindFile, Mode: 0o600, UID: 2, GID: 50},
		{Path: "c", Kind: model.KindDir, Mode: 0o700, UID: 4242, GID: 0},
		{Path: "d", Kind: model.KindSymlink, Mode: 0o777, UID: 1001, GID: 0},
		{Path: "e", Kind: model.KindFile, Mode: 0o600, UID: 1002, GID: 0},
	}
	names := []wire.IDName{{ID: 1001, Name: "alice"}, {ID: 1002, Name: "carol"}, {Group: true, ID: 50, Name: "staff"}}
	r.Translate(e, names)
	for i, want := range []struct {
		uid, gid uint32
		mode     fs.FileMode
	}{{7, 4, 0o664}, {8, 50, 0o664}, {9, 4, fs.ModeSetgid | 0o775}, {7, 4, 0o777}, {1002, 4, 0o664}} {
		if e[i].UID != want.uid || e[i].GID != want.gid || e[i].Mode != want.mode {
			t.Errorf("%s: %d:%d %v, want %d:%d %v", e[i].Path, e[i].UID, e[i].GID, e[i].Mode, want.uid, want.gid, want.mode)
		}
	}
}
