package xattrs

import (
	"errors"
	"testing"
)

// The values rsync's set_stat_xattr writes ("%o %u,%u %u:%u") read back
// as written, and what is not that format is refused.
func TestStatFormat(t *testing.T) {
	for _, c := range []struct {
		v string
		s Stat
	}{
		{"100644 0,0 1234:5678", Stat{Mode: 0o100644, UID: 1234, GID: 5678}},
		{"20666 1,3 0:0", Stat{Mode: 0o020666, Major: 1, Minor: 3}},
		{"60640 259,1048575 0:6", Stat{Mode: 0o060640, Major: 259, Minor: 1<<20 - 1, GID: 6}},
		{"104755 0,0 0:0", Stat{Mode: 0o104755}},
		{"41777 0,0 4294967294:4294967294", Stat{Mode: 0o041777, UID: 1<<32 - 2, GID: 1<<32 - 2}},
	} {
		got, err := ParseStat(c.v)
		if err != nil || got != c.s {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", c.v, got, err, c.s)
		}
		if f := c.s.Format(); f != c.v {
			t.Errorf("Format(%+v) = %q, want %q", c.s, f, c.v)
		}
	}
	for _, v := range []string{"", "100644", "100644 0,0", "100644 0 0:0", "100644 0,0 0", "100648 0,0 0:0", "x 0,0 0:0", "100644 0,0 -1:0", "100644 0,0 0:99999999999"} {
		if s, err := ParseStat(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseStat(%q) = %+v, %v; want ErrCorrupt", v, s, err)
		}
	}
}
