package unixmode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// What rsync 3.x makes of a file of mode 0750 and a directory of 0751 with
// each --chmod, under umask 022 (run by hand, and by TestChmodAgainstRsync).
func TestChmod(t *testing.T) {
	for _, c := range []struct {
		spec      string
		file, dir uint32
	}{
		{"D2775,F664", 0o664, 0o2775},
		{"F7777", 0o7777, 0o751},
		{"g=u", 0o770, 0o771},
		{"Fg=u,o=g", 0o777, 0o755},
		{"=u", 0o755, 0o755},
		{"Fu+g", 0o750, 0o751},
		{"o+s", 0o4750, 0o4751}, // s without u or g: setuid, as rsync
		{"F+t", 0o1750, 0o751},
		{"Fg-o", 0o750, 0o751},
		{"u=g,o=u", 0o555, 0o555},
		{"F+X", 0o751, 0o751},
		{"Du+s", 0o750, 0o4751},
		{"Fug=rwX", 0o770, 0o751},
		{"u+w", 0o750, 0o751},
		{"Fgo-w", 0o750, 0o751},
		{"a+rX", 0o755, 0o755},
		{"go=", 0o700, 0o700},
		{"+w", 0o750, 0o751}, // masked by the umask: u alone
		{"a+w", 0o772, 0o773},
		{"-x", 0o640, 0o640},
		{"D0,F0", 0, 0},
		{"u=rw,g=r,o=", 0o640, 0o640},
		{"ug+s", 0o6750, 0o6751},
		{"u=s", 0o4050, 0o4051},
		{"Fa-rwx,Fu+r", 0o400, 0o751},
	} {
		m, err := ParseChmod(c.spec, 0o022)
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if got := m.Apply(0o750, false); got != c.file {
			t.Errorf("%s on a file of 0750: %04o, want %04o", c.spec, got, c.file)
		}
		if got := m.Apply(0o751, true); got != c.dir {
			t.Errorf("%s on a directory of 0751: %04o, want %04o", c.spec, got, c.dir)
		}
	}
}

// X adds x only to directories and to files with some x bit as sent.
func TestChmodX(t *testing.T) {
	m, err := ParseChmod("a+rX", 0o022)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode uint32
		dir  bool
		want uint32
	}{{0o600, false, 0o644}, {0o700, false, 0o755}, {0o010, false, 0o555}, {0o700, true, 0o755}, {0o600, true, 0o755}} {
		if got := m.Apply(c.mode, c.dir); got != c.want {
			t.Errorf("a+rX on %04o (dir %v): %04o, want %04o", c.mode, c.dir, got, c.want)
		}
	}
}

// What rsync refuses, refused.
func TestChmodErrors(t *testing.T) {
	for _, spec := range []string{"", "u+w,", ",u+w", "F77777", "u755", "Fo=u+x", "FD+x", "DF644", "u", "u+q", "u+w+x", "g=uo", "g=ur", "g+ru", "8", "64a", "u+rw-x", "x+r"} {
		if m, err := ParseChmod(spec, 0o022); err == nil {
			t.Errorf("%q parsed as %+v, want an error", spec, m)
		} else if !strings.Contains(err.Error(), "--chmod") {
			t.Errorf("%q: error %q does not name --chmod", spec, err)
		}
	}
}

// The same specs given to rsync and to Chmod make the same modes, on files
// and directories of a spread of modes (setuid and sticky among them).
func TestChmodAgainstRsync(t *testing.T) {
	rsync, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("rsync not installed")
	}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	modes := []uint32{0o000, 0o644, 0o755, 0o750, 0o700, 0o4755, 0o2750, 0o1777, 0o640, 0o070, 0o007, 0o6711, 0o001}
	src := t.TempDir()
	for i, m := range modes {
		f := filepath.Join(src, fmt.Sprintf("f%d", i))
		d := filepath.Join(src, fmt.Sprintf("d%d", i))
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{f, d} {
			if err := syscall.Chmod(p, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Chmod(src, 0o755)
	specs := []string{"D2775,F664", "g=u", "o=g,g=o", "+w", "a+rX", "Fgo-w", "u+w,go-w,+X", "=rX", "o+s", "Dg+s,ug+w,Fo-w,+X",
		"ug=rwX,o=", "-s", "u-s,g-s", "+t", "a=", "=u", "-u", "g+o", "D755,F644", "F1755", "ug+s,o-rwx", "u=rwx,g=rx,o=x", "Fu=g"}
	for _, spec := range specs {
		m, err := ParseChmod(spec, 0o022)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		dst := filepath.Join(t.TempDir(), "d")
		if out, err := exec.Command(rsync, "-rp", "--chmod="+spec, src+"/", dst+"/").CombinedOutput(); err != nil {
			t.Fatalf("rsync --chmod=%s: %v\n%s", spec, err, out)
		}
		for i, mode := range modes {
			for _, dir := range []bool{false, true} {
				name := fmt.Sprintf("f%d", i)
				if dir {
					name = fmt.Sprintf("d%d", i)
				}
				var st syscall.Stat_t
				if err := syscall.Lstat(filepath.Join(dst, name), &st); err != nil {
					t.Fatal(err)
				}
				if got, want := m.Apply(mode, dir), st.Mode&0o7777; got != want {
					t.Errorf("--chmod=%s on %04o (dir %v): %04o, rsync %04o", spec, mode, dir, got, want)
				}
			}
		}
	}
}

func FuzzParseChmod(f *testing.F) {
	for _, s := range []string{"D2775,F664", "u+w", "Fgo-w", "a+rX", "g=u", "o+s", "=", "7777", "Du=rwx,Fg-o"} {
		f.Add(s, uint32(0o644), true)
	}
	f.Fuzz(func(t *testing.T, spec string, mode uint32, dir bool) {
		m, err := ParseChmod(spec, 0o022)
		if err != nil {
			return
		}
		if len(m) != strings.Count(spec, ",")+1 {
			t.Fatalf("%q: %d clauses", spec, len(m))
		}
		got := m.Apply(mode, dir)
		if got&^permBits != 0 {
			t.Fatalf("%q on %o: %o, beyond the permission bits", spec, mode, got)
		}
		// Applying a spec to what it made changes nothing more unless a
		// clause depends on the mode (a copy, an X, a + after a -).
		if strings.ContainsAny(spec, "+-ugoX") {
			return
		}
		if again := m.Apply(got, dir); again != got {
			t.Fatalf("%q: %o then %o", spec, got, again)
		}
	})
}
