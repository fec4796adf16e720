package rundir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSocketDirShortFallback: where a home is too long for sun_path, the
// socket goes to /tmp/bulkmove-UID (here under a directory of the test's,
// as /run/user/UID is missing), made 0700; one that is not this user's
// private directory is refused, never used.
func TestSocketDirShortFallback(t *testing.T) {
	uid := os.Geteuid()
	long := filepath.Join(t.TempDir(), strings.Repeat("h", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	places := func(short string) runPlaces {
		return runPlaces{home: long, uid: uid, run: filepath.Join(t.TempDir(), "none"), short: short}
	}
	const nameLen = len("agent-0123456789abcdef.sock")

	short := shortTempDir(t)
	d, err := places(short).socketDir(nameLen)
	want := filepath.Join(short, fmt.Sprintf("bulkmove-%d", uid))
	if err != nil || d != want {
		t.Fatalf("socketDir: %q, %v; want %s", d, err, want)
	}
	if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v, %v; want 0700", d, fi.Mode(), err)
	}

	for _, c := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"open to others", func(p string) error { return os.Mkdir(p, 0o755) }, "has mode 0755, open to group or others: refused"},
		{"a symlink", func(p string) error { return os.Symlink(t.TempDir(), p) }, "is a symlink: refused"},
		{"another user's", func(p string) error {
			if uid != 0 {
				t.Skip("making a directory another user's needs root")
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}, "belongs to uid 65534, not to this user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			short := shortTempDir(t)
			p := filepath.Join(short, fmt.Sprintf("bulkmove-%d", uid))
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			d, err := places(short).socketDir(nameLen)
			if err == nil || !strings.Contains(err.Error(), p+" "+c.want) {
				t.Fatalf("socketDir with %s %s: %q, %v; want refused (%q)", p, c.name, d, err, c.want)
			}
		})
	}
	t.Run("parent writable by others, not sticky", func(t *testing.T) {
		short := shortTempDir(t)
		if err := os.Chmod(short, 0o777); err != nil {
			t.Fatal(err)
		}
		if _, err := places(short).socketDir(nameLen); err == nil || !strings.Contains(err.Error(), short+" has mode 0777, writable by group or others: refused") {
			t.Fatalf("socketDir under a world-writable parent: %v, want refused", err)
		}
	})
}
