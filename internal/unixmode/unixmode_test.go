package unixmode

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		m    fs.FileMode
		want uint32
	}{
		{0o644, 0o644},
		{0o755 | fs.ModeSetuid, 0o4755},
		{0o2750&^0o2000 | fs.ModeSetgid, 0o2750},
		{0o777 | fs.ModeSticky | fs.ModeDir, 0o1777},
	} {
		if got := Of(c.m); got != c.want {
			t.Errorf("Of(%v) = %#o, want %#o", c.m, got, c.want)
		}
	}
}

func TestFileMode(t *testing.T) {
	for u := uint32(0); u <= 0o7777; u++ {
		if got := Of(FileMode(u)); got != u {
			t.Fatalf("Of(FileMode(%#o)) = %#o", u, got)
		}
	}
}
