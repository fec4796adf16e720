package itemize

import (
	"testing"

	"github.com/bulkmove/bulkmove/model"
	"github.com/bulkmove/bulkmove/wire"
)

func TestCode(t *testing.T) {
	for _, c := range []struct {
		kind   model.Kind
		flags  uint16
		pushed bool
		want   string
	}{
		{model.KindFile, 0, false, ""},
		{model.KindFile, wire.ItemNew | wire.ItemSent, false, ">f+++++++++"},
		{model.KindFile, wire.ItemNew | wire.ItemSent, true, "<f+++++++++"},
		{model.KindFile, wire.ItemSize | wire.ItemTime | wire.ItemSent, false, ">f.st......"},
		{model.KindFile, wire.ItemTime | wire.ItemSent, false, ">f..t......"},
		{model.KindFile, wire.ItemContent | wire.ItemTime | wire.ItemSent, false, ">fc.t......"},
		{model.KindFile, wire.ItemPerms, false, ".f...p....."},
		{model.KindFile, wire.ItemOwner | wire.ItemGroup, true, ".f....og..."},
		{model.KindDir, wire.ItemNew, false, "cd+++++++++"},
		{model.KindDir, wire.ItemTime, false, ".d..t......"},
		{model.KindSymlink, wire.ItemNew, false, "cL+++++++++"},
		{model.KindSymlink, wire.ItemContent | wire.ItemTime, false, "cLc.t......"},
		{model.KindSymlink, wire.ItemTime, false, ".L..t......"},
		{model.KindHardlink, wire.ItemNew, false, "hf+++++++++"},
		{model.KindCharDevice, wire.ItemNew, false, "cD+++++++++"},
		{model.KindBlockDevice, wire.ItemContent, false, "cDc........"},
		{model.KindCharDevice, wire.ItemTime | wire.ItemPerms, true, ".D..tp....."},
		{model.KindFIFO, wire.ItemNew, false, "cS+++++++++"},
		{model.KindSocket, wire.ItemNew, true, "cS+++++++++"},
	} {
		if got := Code(c.kind, c.flags, c.pushed); got != c.want {
			t.Errorf("Code(%v, %#x, %v) = %q, want %q", c.kind, c.flags, c.pushed, got, c.want)
		}
	}
}

// TestDefaultFormat: -i's line, '%i %n%L', names each kind as rsync's -i
// does: a directory with a slash, a symlink with its target, a hard link
// with its first name, a deletion's code 11 wide.
func TestDefaultFormat(t *testing.T) {
	f, err := ParseFormat(Default)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e    model.Entry
		code string
		want string
	}{
		{model.Entry{Path: ".", Kind: model.KindDir}, "cd+++++++++", "cd+++++++++ ./"},
		{model.Entry{Path: "a/b", Kind: model.KindDir}, ".d..t......", ".d..t...... a/b/"},
		{model.Entry{Path: "l", Kind: model.KindSymlink, Link: "../t"}, "cL+++++++++", "cL+++++++++ l -> ../t"},
		{model.Entry{Path: "h", Kind: model.KindHardlink, Link: "f"}, "hf+++++++++", "hf+++++++++ h => f"},
		{model.Entry{Path: "f", Kind: model.KindFile}, ">f.st......", ">f.st...... f"},
		{model.Entry{Path: "gone", Kind: model.KindDir}, Deleted, "*deleting   gone/"},
		{model.Entry{Path: "bad\x1b[2Jname", Kind: model.KindFile}, ">f+++++++++", `>f+++++++++ bad\x1b[2Jname`}, // escaped, not raw
	} {
		if got := f.Line(&Record{Entry: &c.e, Code: c.code}); got != c.want {
			t.Errorf("%+v, %s: %q, want %q", c.e, c.code, got, c.want)
		}
	}
}
