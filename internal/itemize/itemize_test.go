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

func TestName(t *testing.T) {
	for _, c := range []struct {
		e    model.Entry
		want string
	}{
		{model.Entry{Path: ".", Kind: model.KindDir}, "./"},
		{model.Entry{Path: "a/b", Kind: model.KindDir}, "a/b/"},
		{model.Entry{Path: "l", Kind: model.KindSymlink, Link: "../t"}, "l -> ../t"},
		{model.Entry{Path: "h", Kind: model.KindHardlink, Link: "f"}, "h => f"},
		{model.Entry{Path: "f", Kind: model.KindFile}, "f"},
	} {
		if got := Name(&c.e); got != c.want {
			t.Errorf("Name(%+v) = %q, want %q", c.e, got, c.want)
		}
	}
	if got := Deleting("gone/"); got != "*deleting   gone/" {
		t.Errorf("Deleting = %q", got)
	}
}
