package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// listenIn listens (Listen) with HOME and XDG_RUNTIME_DIR as given, and
// returns the socket, closed again, or why it was refused.
func listenIn(t *testing.T, home, xdg string) (sock, refused string) {
	t.Helper()
	t.Setenv("HOME", home)
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	t.Setenv("XDG_STATE_HOME", "")
	ln, sock, err := Listen("agent")
	if err != nil {
		return "", err.Error()
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("Listen: %s is no socket: %v", sock, err)
	}
	ln.Close()
	return sock, ""
}

// shortTempDir is a new directory whose path is short (a test's TempDir
// has the test's name in it, long enough to pass sun_path with a socket).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// privateDir makes a directory of mode perm (umask aside).
func privateDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	d := filepath.Join(shortTempDir(t), "d")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, perm); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestListenDir: a socket is in this user's private directory, never in a shared one: $XDG_RUNTIME_DIR/bulkmove when that
// is this user's and 0700, else ~/.local/state/bulkmove/run; a runtime
// directory open to others, another user's, or a symlink is passed over,
// a home that others can write is refused with the reason, and a home too
// long for sun_path gets a shorter directory of this user's.
func TestListenDir(t *testing.T) {
	under := func(t *testing.T, sock, dir string) {
		t.Helper()
		if filepath.Dir(sock) != dir {
			t.Fatalf("socket %s, want it in %s", sock, dir)
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Fatalf("socket directory %s: %v, %v; want this user's, 0700", dir, fi.Mode(), err)
		}
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("socket %s left after its listener closed: %v", sock, err)
		}
	}
	t.Run("runtime dir", func(t *testing.T) {
		xdg := privateDir(t, 0o700)
		sock, why := listenIn(t, privateDir(t, 0o700), xdg)
		if why != "" {
			t.Fatalf("refused: %s", why)
		}
		under(t, sock, filepath.Join(xdg, "bulkmove"))
	})
	home := func(t *testing.T, xdg string) {
		t.Helper()
		h := privateDir(t, 0o700)
		sock, why := listenIn(t, h, xdg)
		if why != "" {
			t.Fatalf("refused: %s", why)
		}
		under(t, sock, filepath.Join(h, ".local", "state", "bulkmove", "run"))
	}
	t.Run("runtime dir group-writable", func(t *testing.T) { home(t, privateDir(t, 0o770)) })
	t.Run("runtime dir a symlink", func(t *testing.T) {
		link := filepath.Join(shortTempDir(t), "link")
		if err := os.Symlink(privateDir(t, 0o700), link); err != nil {
			t.Fatal(err)
		}
		home(t, link)
	})
	t.Run("runtime dir another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("making a directory another user's needs root")
		}
		xdg := privateDir(t, 0o700)
		if err := os.Chown(xdg, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		home(t, xdg)
	})
	t.Run("no runtime dir", func(t *testing.T) { home(t, "") })
	t.Run("home group-writable", func(t *testing.T) {
		h := privateDir(t, 0o770)
		sock, why := listenIn(t, h, "")
		if why == "" || !strings.Contains(why, h+" has mode 0770, writable by group or others: refused") {
			t.Fatalf("Listen with HOME %s group-writable: socket %q, refusal %q; want it refused, naming the home", h, sock, why)
		}
	})
	t.Run("long home", func(t *testing.T) {
		h := filepath.Join(privateDir(t, 0o700), strings.Repeat("h", 100))
		if err := os.Mkdir(h, 0o700); err != nil {
			t.Fatal(err)
		}
		sock, why := listenIn(t, h, "")
		if why != "" {
			t.Fatalf("refused: %s", why)
		}
		if len(sock) > 107 || strings.HasPrefix(sock, h) {
			t.Fatalf("socket %s (%d bytes), want one that fits in sun_path, outside the long home", sock, len(sock))
		}
		under(t, sock, filepath.Dir(sock))
	})
}
