package sshx

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// knownHostsMu serializes recording new host keys within the process, so
// that the K connections of DialN record an unknown host once.
var knownHostsMu sync.Mutex

type hostKeyChecker struct {
	s      *settings
	lookup string // host:port as known_hosts names it (before normalization)
	hint   string // the ssh command that would record the key
	warn   func(string)
}

// knownHostsLookup is the name under which known_hosts stores s: the
// HostKeyAlias as is, else HostName with the port ([host]:port unless 22).
func knownHostsLookup(s *settings) string {
	if s.HostKeyAlias != "" {
		return net.JoinHostPort(s.HostKeyAlias, "22")
	}
	return net.JoinHostPort(s.HostName, strconv.Itoa(s.Port))
}

func (h *hostKeyChecker) files() []string {
	var out []string
	for _, f := range append(append([]string(nil), h.s.UserKnownHosts...), h.s.GlobalKnownHosts...) {
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() {
			if r, err := os.Open(f); err == nil {
				r.Close()
				out = append(out, f)
			}
		}
	}
	return out
}

func (h *hostKeyChecker) db() (*knownhosts.HostKeyDB, error) {
	db, err := knownhosts.NewDB(h.files()...)
	if err != nil {
		return nil, fmt.Errorf("reading known_hosts: %w", err)
	}
	return db, nil
}

// algorithms lists the host key algorithms known_hosts holds for the host
// first (so that the server presents a key we can check: golang/go#29286),
// then every other algorithm, so that a server that lost its old key type
// shows up as a changed key, as with OpenSSH.
func (h *hostKeyChecker) algorithms(db *knownhosts.HostKeyDB) []string {
	supported := ssh.SupportedAlgorithms().HostKeys
	usable := append(slices.Clone(supported), ssh.InsecureAlgorithms().HostKeys...)
	var out []string
	for _, a := range db.HostKeyAlgorithms(h.lookup) {
		if slices.Contains(usable, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil // library default
	}
	for _, a := range supported {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

var placeholderAddr = &net.TCPAddr{IP: net.IPv4zero}

func (h *hostKeyChecker) callback(db *knownhosts.HostKeyDB) ssh.HostKeyCallback {
	return func(_ string, remote net.Addr, key ssh.PublicKey) error {
		if _, ok := remote.(*net.TCPAddr); !ok {
			remote = placeholderAddr // through a jump host or a ProxyCommand
		}
		err := db.HostKeyCallback()(h.lookup, remote, key)
		if err == nil {
			return nil
		}
		if knownhosts.IsHostKeyChanged(err) {
			return h.changed(err, key)
		}
		if !knownhosts.IsHostUnknown(err) {
			return h.other(err, key)
		}
		if !h.s.AcceptNew {
			return h.unknown(key)
		}
		knownHostsMu.Lock()
		defer knownHostsMu.Unlock()
		// Another connection may have recorded it meanwhile.
		db2, err := h.db()
		if err != nil {
			return err
		}
		err = db2.HostKeyCallback()(h.lookup, remote, key)
		switch {
		case err == nil:
			return nil
		case knownhosts.IsHostKeyChanged(err):
			return h.changed(err, key)
		case !knownhosts.IsHostUnknown(err):
			return h.other(err, key)
		}
		return h.record(key)
	}
}

func (h *hostKeyChecker) displayName() string {
	n := knownhosts.Normalize(h.lookup)
	if n == h.s.Alias {
		return h.s.Alias
	}
	return fmt.Sprintf("%s (%s)", h.s.Alias, n)
}

func (h *hostKeyChecker) unknown(key ssh.PublicKey) error {
	return &kindError{kind: ErrHostKeyUnknown, msg: fmt.Sprintf(
		"host key for %s is not known: run %q once to check and record it, or pass --accept-new-host-key (the server offers %s key %s)",
		h.displayName(), h.hint, key.Type(), ssh.FingerprintSHA256(key))}
}

func (h *hostKeyChecker) changed(err error, key ssh.PublicKey) error {
	where := ""
	var ke *xknownhosts.KeyError
	if errors.As(err, &ke) && len(ke.Want) > 0 {
		w := ke.Want[0]
		where = fmt.Sprintf(" (%s key %s at %s:%d)", w.Key.Type(), ssh.FingerprintSHA256(w.Key), w.Filename, w.Line)
	}
	return &kindError{kind: ErrHostKeyChanged, msg: fmt.Sprintf(
		"WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED for %s! The server offers %s key %s, "+
			"but known_hosts has another key for it%s. Someone could be eavesdropping on you right now "+
			"(a man-in-the-middle attack), or the host key has just been replaced: refusing to connect. "+
			"If the change is expected, remove the old key with: ssh-keygen -R %q",
		h.displayName(), key.Type(), ssh.FingerprintSHA256(key), where, knownhosts.Normalize(h.lookup))}
}

// other handles a revoked key (or a known_hosts that cannot be read).
func (h *hostKeyChecker) other(err error, key ssh.PublicKey) error {
	var re *xknownhosts.RevokedError
	if errors.As(err, &re) {
		return &kindError{kind: ErrHostKeyChanged, msg: fmt.Sprintf(
			"host key %s %s of %s is marked @revoked in %s:%d: refusing to connect",
			key.Type(), ssh.FingerprintSHA256(key), h.displayName(), re.Revoked.Filename, re.Revoked.Line)}
	}
	return fmt.Errorf("checking the host key of %s: %w", h.displayName(), err)
}

// record appends the key to the first user known_hosts file.
func (h *hostKeyChecker) record(key ssh.PublicKey) error {
	if len(h.s.UserKnownHosts) == 0 {
		h.warn(fmt.Sprintf("accepting the host key of %s (%s %s) without recording it: no UserKnownHostsFile",
			h.displayName(), key.Type(), ssh.FingerprintSHA256(key)))
		return nil
	}
	file := h.s.UserKnownHosts[0]
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("recording the host key of %s: %w", h.s.Alias, err)
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("recording the host key of %s: %w", h.s.Alias, err)
	}
	defer f.Close()
	// Make sure the new line starts on a line of its own.
	prefix := ""
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			prefix = "\n"
		}
	}
	name := knownhosts.Normalize(h.lookup)
	if h.s.HashKnownHosts {
		name = xknownhosts.HashHostname(name)
	}
	line := prefix + name + " " + string(ssh.MarshalAuthorizedKey(key))
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("recording the host key of %s in %s: %w", h.s.Alias, file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("recording the host key of %s in %s: %w", h.s.Alias, file, err)
	}
	h.warn(fmt.Sprintf("Permanently added %s (%s %s) to %s", knownhosts.Normalize(h.lookup), key.Type(),
		ssh.FingerprintSHA256(key), file))
	return nil
}
