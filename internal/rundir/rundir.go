// Package rundir makes the private directory where bulkmove's Unix sockets
// live (an agent's, a pull's send-hub's) and listens there (Listen). It
// imports nothing of bulkmove's: the daemons and the sender's hubs use it.
//
// The sockets live in a directory of this user's alone, never in a shared
// one such as /tmp: a socket's path outlives its listener in the sender's
// records (a lingering agent's), and in a shared directory another user
// could make the same path after the listener is gone. The directory is
//
//   - $XDG_RUNTIME_DIR/bulkmove, if $XDG_RUNTIME_DIR is this user's and
//     mode 0700 (systemd's /run/user/UID, emptied at logout and reboot);
//   - else ~/.local/state/bulkmove/run ($XDG_STATE_HOME/bulkmove/run if
//     that is set), beside the sender's own state;
//   - and, where the socket's path would not fit in sun_path (a long home),
//     /run/user/UID/bulkmove if that is this user's, else /tmp/bulkmove-UID.
//
// Each is checked before use as OpenSSH's StrictModes checks a home: the
// directory the sockets are in (made 0700 here), and $XDG_RUNTIME_DIR,
// owned by this user, open to no one else, not a symlink; every directory
// above (symlinks resolved) owned by this user or root and writable by no
// one else, unless sticky (/tmp: others cannot rename or remove what is in
// it). A directory that fails is refused with the reason, never used.
package rundir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// sunPathMax is the longest path a Unix socket can have: sun_path holds
// 108 bytes, the NUL included.
const sunPathMax = 107

// randomName is a socket name's random part: 64 bits in hex, enough
// that no one guesses it, short enough for sun_path.
func randomName() string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// runPlaces is where socketDir looks: the environment's and this user's.
type runPlaces struct {
	xdg   string // $XDG_RUNTIME_DIR
	home  string // $HOME
	state string // $XDG_STATE_HOME
	uid   int
	run   string // /run/user/UID's parent
	short string // the short fallback's parent
}

func thisUserRunPlaces() runPlaces {
	return runPlaces{xdg: os.Getenv("XDG_RUNTIME_DIR"), home: os.Getenv("HOME"), state: os.Getenv("XDG_STATE_HOME"), uid: os.Geteuid(), run: "/run/user", short: "/tmp"}
}

// socketDir returns the checked private directory for a socket whose file
// name is nameLen bytes long, made if missing.
func (p runPlaces) socketDir(nameLen int) (string, error) {
	fits := func(dir string) bool { return len(dir)+1+nameLen <= sunPathMax }
	long := false
	if filepath.IsAbs(p.xdg) && ownPrivateDir(p.xdg, p.uid) == nil {
		d := filepath.Join(p.xdg, "bulkmove")
		if fits(d) {
			return d, makePrivateDir(d, p.uid)
		}
		long = true
	}
	if !long {
		if !filepath.IsAbs(p.home) {
			return "", fmt.Errorf("no private directory for a socket: $HOME %q is not an absolute path (and $XDG_RUNTIME_DIR is unset, or not this user's with mode 0700)", p.home)
		}
		state := filepath.Join(p.home, ".local", "state")
		if filepath.IsAbs(p.state) {
			state = p.state
		}
		d := filepath.Join(state, "bulkmove", "run")
		if fits(d) {
			// The directories above are checked before anything is made
			// in them, and again once made (0700 where missing).
			if err := trustedAncestors(p.home, p.uid); err != nil {
				return "", err
			}
			if err := os.MkdirAll(filepath.Dir(d), 0o700); err != nil {
				return "", fmt.Errorf("the socket directory %s: %w", d, err)
			}
			if err := trustedAncestors(filepath.Dir(d), p.uid); err != nil {
				return "", err
			}
			return d, makePrivateDir(d, p.uid)
		}
	}
	// A path too long for sun_path: a shorter directory of this user's.
	if run := filepath.Join(p.run, fmt.Sprint(p.uid)); ownPrivateDir(run, p.uid) == nil {
		if d := filepath.Join(run, "bulkmove"); fits(d) {
			return d, makePrivateDir(d, p.uid)
		}
	}
	d := filepath.Join(p.short, fmt.Sprintf("bulkmove-%d", p.uid))
	if !fits(d) {
		return "", fmt.Errorf("no private directory for a socket short enough for sun_path (%d bytes): %s is too long", sunPathMax, d)
	}
	return d, makePrivateDir(d, p.uid)
}

// ownPrivateDir checks that dir is a directory (not a symlink) owned by
// uid, with no access for group or others, under trusted parents.
func ownPrivateDir(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the socket directory %s: %w", dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("the socket directory %s is a symlink: refused (another user could point it elsewhere)", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the socket directory %s is not a directory", dir)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid {
		return fmt.Errorf("the socket directory %s belongs to uid %d, not to this user (uid %d): refused", dir, st.Uid, uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the socket directory %s has mode %04o, open to group or others: refused (want 0700)", dir, fi.Mode().Perm())
	}
	return trustedAncestors(filepath.Dir(dir), uid)
}

// makePrivateDir makes dir 0700 if it is missing, and checks it (with
// ownPrivateDir) whether it was just made or found.
func makePrivateDir(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("the socket directory %s: %w", dir, err)
	}
	return ownPrivateDir(dir, uid)
}

// trustedAncestors checks dir and every directory above it, symlinks
// resolved: each owned by uid or root, and writable by no one else unless
// it is sticky.
func trustedAncestors(dir string, uid int) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("the socket directory's parent %s: %w", dir, err)
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("the socket directory's parent %s: %w", d, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != uid && st.Uid != 0 {
			return fmt.Errorf("the socket directory's parent %s belongs to uid %d, neither this user (uid %d) nor root: refused", d, st.Uid, uid)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("the socket directory's parent %s has mode %04o, writable by group or others: refused (another user could replace what is in it)", d, fi.Mode().Perm())
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// Listen listens on a new Unix socket named prefix-RANDOM.sock in this
// user's socket directory (see the package doc), made if missing and
// checked; it returns the listener and the socket's path. Closing the
// listener removes the socket.
func Listen(prefix string) (net.Listener, string, error) {
	name := func() string { return prefix + "-" + randomName() + ".sock" }
	dir, err := thisUserRunPlaces().socketDir(len(name()))
	if err != nil {
		return nil, "", err
	}
	for try := 0; ; try++ {
		sock := filepath.Join(dir, name())
		ln, err := net.Listen("unix", sock)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) && try < 3 {
				continue // a name left by a listener that was killed: another draw
			}
			return nil, "", fmt.Errorf("listening on %s: %w", sock, err)
		}
		return ln, sock, nil
	}
}
