package idmap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMap(t *testing.T) {
	ids := map[string]uint32{"bob": 2002, "staff": 50, "nobody": 65534}
	lookup := func(s string) (uint32, bool) { id, ok := ids[s]; return id, ok }
	for _, c := range []struct {
		spec   string
		id     uint32
		name   string
		want   uint32
		hit    bool
		byName bool
	}{
		{"alice:bob", 1001, "alice", 2002, true, true},
		{"alice:bob", 1001, "carol", 1001, false, true},
		{"1001:bob", 1001, "", 2002, true, false},
		{"1001:bob", 1002, "alice", 1002, false, false},
		{"0-99:nobody,*:7", 50, "x", 65534, true, true},
		{"0-99:nobody,*:7", 100, "x", 7, true, true},
		{"0-99:nobody,*:7", 100, "", 7, true, true}, // * matches ids without a name too
		{":nobody", 4242, "", 65534, true, true},    // the empty name: ids without one
		{":nobody", 4242, "someone", 4242, false, true},
		{"a*:bob,b?:staff", 5, "bx", 50, true, true},
		{"a*:bob,b?:staff", 5, "bxy", 5, false, true},
		{"[ab]*:bob", 5, "bee", 2002, true, true},
		{"wayne:10,wayne:11", 5, "wayne", 10, true, true}, // first match wins
		{"root:nobody", 0, "root", 65534, true, true},
		{"0:nobody", 0, "", 65534, true, false},
		{"10-20:30", 20, "", 30, true, false},
		{"10-20:30", 21, "", 21, false, false},
	} {
		m, err := Parse("--usermap", c.spec)
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if err := m.Resolve(lookup); err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if got, hit := m.Match(c.id, c.name); got != c.want || hit != c.hit {
			t.Errorf("%s: %d(%s) -> %d %v, want %d %v", c.spec, c.id, c.name, got, hit, c.want, c.hit)
		}
		if m.NeedsNames() != c.byName {
			t.Errorf("%s: NeedsNames %v", c.spec, !c.byName)
		}
	}
}

func TestMapErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"alice", "no colon"},
		{"alice:", "no name after the colon"},
		{"1x:bob", "invalid number"},
		{"5-:bob", "invalid number"},
		{"1-2-3:bob", "invalid number"},
		{"9-3:bob", "invalid number"},
		{"99999999999:bob", "invalid number"},
		{"alice:bob,", "no colon"},
		{"alice:b\nob", "newline"},
		{"a:" + strings.Repeat("x", 256), "longer than"},
	} {
		_, err := Parse("--usermap", c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--usermap") {
			t.Errorf("%q: error %v, want one with --usermap and %q", c.spec, err, c.want)
		}
	}
	m, err := Parse("--groupmap", "*:nosuchgroup")
	if err != nil {
		t.Fatal(err)
	}
	err = m.Resolve(func(string) (uint32, bool) { return 0, false })
	if err == nil || err.Error() != `--groupmap: no group "nosuchgroup" on the receiver` {
		t.Errorf("unknown TO: %v", err)
	}
}

func TestChown(t *testing.T) {
	for _, c := range []struct{ in, u, g string }{
		{"bob:staff", "*:bob", "*:staff"}, {"bob", "*:bob", ""}, {"bob:", "*:bob", ""}, {":staff", "", "*:staff"}, {":", "", ""},
	} {
		if u, g := Chown(c.in); u != c.u || g != c.g {
			t.Errorf("Chown(%q) = %q, %q; want %q, %q", c.in, u, g, c.u, c.g)
		}
	}
}

// The files, read where there is no getent: names and ids both ways, an
// entry named with digits found by its name, not taken for an id.
func TestNamesFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	gr := filepath.Join(dir, "group")
	os.WriteFile(pw, []byte("# comment\nroot:x:0:0::/:/bin/sh\nalice:x:1001:1001::/:/bin/sh\n7:x:1234:1::/:/bin/sh\nbroken\n"), 0o644)
	os.WriteFile(gr, []byte("root:x:0:\nstaff:x:50:alice\n"), 0o644)
	n := NewNames()
	n.getent, n.passwd, n.group = "", pw, gr
	if got := n.User(1001); got != "alice" {
		t.Errorf("User(1001) = %q", got)
	}
	if got := n.User(7); got != "" {
		t.Errorf("User(7) = %q, want none", got)
	}
	if id, ok := n.UID("7"); !ok || id != 1234 {
		t.Errorf("UID(7) = %d %v, want 1234", id, ok)
	}
	if id, ok := n.GID("staff"); !ok || id != 50 {
		t.Errorf("GID(staff) = %d %v", id, ok)
	}
	if _, ok := n.UID("nosuch"); ok {
		t.Error("UID(nosuch) found")
	}
	if got := n.Group(50); got != "staff" {
		t.Errorf("Group(50) = %q", got)
	}
}

// getent: this host's root, and a key that looks like an option is a key.
func TestNamesGetent(t *testing.T) {
	n := NewNames()
	if n.getent == "" {
		t.Skip("no getent")
	}
	if got := n.User(0); got != "root" {
		t.Errorf("User(0) = %q", got)
	}
	if id, ok := n.UID("root"); !ok || id != 0 {
		t.Errorf("UID(root) = %d %v", id, ok)
	}
	if _, ok := n.UID("0"); ok {
		t.Error(`UID("0") found: an id taken for a name`)
	}
	if _, ok := n.UID("--help"); ok {
		t.Error("UID(--help) found")
	}
}
