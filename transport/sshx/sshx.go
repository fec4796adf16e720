// Package sshx is bulkmove's SSH client side: it parses remote specs
// (host:path), opens authenticated SSH connections the way OpenSSH's ssh(1)
// would (~/.ssh/config, known_hosts, ssh-agent, identity files, ProxyJump),
// opens K of them in parallel for the K streams of a transfer, runs remote
// commands over them, and makes sure the remote has a usable `bulkmove`
// (through agentbin, which uploads this very binary to a per-version cache
// when it has none).
//
// What is honoured from ssh_config (user file, or Options.ConfigFile like -F,
// plus /etc/ssh/ssh_config when no -F is given): Host and Match blocks (Match
// all, host, originalhost, user, localuser, final; exec, canonical and other
// criteria never match), Include, HostName, User, Port, IdentityFile,
// CertificateFile, IdentitiesOnly, IdentityAgent, ProxyJump, ProxyCommand,
// UserKnownHostsFile, GlobalKnownHostsFile, HostKeyAlias, HashKnownHosts,
// StrictHostKeyChecking, ConnectTimeout, ServerAliveInterval,
// ServerAliveCountMax, BatchMode. Anything else is ignored, never an error.
//
// Jump hosts (ProxyJump, -J) are resolved through ssh_config like any host
// (HostName, User, Port, IdentityFile, known_hosts), but their own
// ProxyJump/ProxyCommand is not followed. Each connection of DialN has its
// own chain of jump connections, so that the K streams stay K separate TCP
// flows end to end.
//
// Cancelling a Session's context closes its channel: sshd does not deliver
// signals for root logins, so a remote command ends by reading EOF on its
// stdin (as `bulkmove --agent` does), not by a signal.
//
// Errors that retrying cannot fix (unknown or changed host key, failed
// authentication, an encrypted key without a terminal) match ErrHostKeyUnknown,
// ErrHostKeyChanged or ErrAuth with errors.Is; IsPermanent reports any of them.
package sshx

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bulkmove/bulkmove/internal/shell"
	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
)

// Target is a parsed remote spec.
type Target struct {
	User string // "" for the ssh_config User or the local user
	Host string // host or Host alias as typed, without IPv6 brackets
	Port int    // 0 for Options.Port, the ssh_config Port, or 22
	Path string // "" means the remote home directory
}

// String returns the spec back in user@host:path form.
func (t Target) String() string {
	h := t.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if t.User != "" {
		h = t.User + "@" + h
	}
	return h + ":" + t.Path
}

// ParseTarget parses "host:path", "user@host:path", "[ipv6]:path",
// "user@[ipv6]:path" and "host:" (the remote home; Path ""). Like scp, it
// reports ok=false for a local path: one with no colon, a slash before the
// first colon ("./a:b", "/x:y"), or a colon first (":x").
func ParseTarget(s string) (t Target, ok bool, err error) {
	colon := -1
	inBracket := false
scan:
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if i == 0 || s[i-1] == '@' {
				inBracket = true
			}
		case ']':
			inBracket = false
		case '/':
			if !inBracket {
				return Target{}, false, nil
			}
		case ':':
			if !inBracket {
				colon = i
				break scan
			}
		}
	}
	if colon <= 0 {
		return Target{}, false, nil
	}
	left, path := s[:colon], s[colon+1:]
	if at := strings.LastIndexByte(left, '@'); at >= 0 {
		t.User, left = left[:at], left[at+1:]
		if t.User == "" {
			return Target{}, true, fmt.Errorf("%q: empty user name before @", s)
		}
	}
	if strings.HasPrefix(left, "[") {
		if !strings.HasSuffix(left, "]") {
			return Target{}, true, fmt.Errorf("%q: bad [ in host, want [address]:path", s)
		}
		left = left[1 : len(left)-1]
	} else if strings.ContainsAny(left, "[]") {
		return Target{}, true, fmt.Errorf("%q: bad [ or ] in host, want [address]:path", s)
	}
	if left == "" {
		return Target{}, true, fmt.Errorf("%q: empty host name", s)
	}
	if strings.ContainsAny(left, "/@") {
		return Target{}, true, fmt.Errorf("%q: invalid host name %q", s, left)
	}
	if err := checkHostName(left); err != nil {
		return Target{}, true, fmt.Errorf("%q: %w", s, err)
	}
	if t.User != "" {
		if strings.ContainsAny(t.User, " \t/:") {
			return Target{}, true, fmt.Errorf("%q: invalid user name %q", s, t.User)
		}
		if err := checkUserName(t.User); err != nil {
			return Target{}, true, fmt.Errorf("%q: %w", s, err)
		}
	}
	t.Host = left
	t.Path = path
	return t, true, nil
}

// Host and user names that reach ssh_config's %-tokens (and from there a
// ProxyCommand's shell) are checked as ssh(1) checks those given on its
// command line since OpenSSH 9.6 (CVE-2023-51385: valid_hostname and
// valid_ruser): before any ssh_config expansion, for the destination, its
// user and every jump host. Names that ssh_config itself supplies
// (HostName, User) are trusted as the configuration is; every %-token is
// shell-quoted in a ProxyCommand all the same (see resolve).

// hostMeta and userMeta are the characters ssh(1) refuses in names.
const (
	hostMeta = "'`\"$\\;&<>|(){},"
	userMeta = "'`\";&<>|(){}"
)

// checkHostName refuses a host name with a shell metacharacter, white
// space or a control character, or a leading '-' (an option to a
// command), as ssh(1)'s valid_hostname does.
func checkHostName(h string) error {
	if h == "" {
		return errors.New("empty host name")
	}
	if h[0] == '-' {
		return fmt.Errorf("invalid host name %q: it starts with '-'", h)
	}
	for _, r := range h {
		if strings.ContainsRune(hostMeta, r) || unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("invalid host name %q: %s is not allowed in a host name", h, quoteRune(r))
		}
	}
	return nil
}

func quoteRune(r rune) string {
	if r == utf8.RuneError {
		return "invalid UTF-8"
	}
	return strconv.QuoteRune(r)
}

// checkUserName refuses a user name with a shell metacharacter or a
// control character, a leading '-', a '-' after white space, or a
// trailing backslash, as ssh(1)'s valid_ruser does ('$' stays allowed, as
// in machine accounts: names are quoted wherever a shell sees them).
func checkUserName(u string) error {
	if u == "" {
		return errors.New("empty user name")
	}
	if u[0] == '-' {
		return fmt.Errorf("invalid user name %q: it starts with '-'", u)
	}
	for i, r := range u {
		switch {
		case strings.ContainsRune(userMeta, r) || unicode.IsControl(r) || r == utf8.RuneError:
			return fmt.Errorf("invalid user name %q: %s is not allowed in a user name", u, quoteRune(r))
		case unicode.IsSpace(r) && strings.HasPrefix(u[i+utf8.RuneLen(r):], "-"):
			return fmt.Errorf("invalid user name %q: a '-' after white space is not allowed in a user name", u)
		case r == '\\' && i == len(u)-1:
			return fmt.Errorf("invalid user name %q: a trailing '\\' is not allowed in a user name", u)
		}
	}
	return nil
}

// checkNames checks a destination's host and user as given (not as
// ssh_config rewrites them).
func checkNames(host, user string) error {
	if err := checkHostName(host); err != nil {
		return err
	}
	if user != "" {
		return checkUserName(user)
	}
	return nil
}

// Options controls how Dial connects. Zero values mean "as ssh_config says,
// else OpenSSH's default"; set fields override ssh_config like ssh's command
// line flags do.
type Options struct {
	Port       int      // -p
	Identities []string // -i, repeatable; tried before ssh_config's IdentityFile, also for jump hosts
	ConfigFile string   // -F: use this file instead of ~/.ssh/config and /etc/ssh/ssh_config
	Jump       string   // -J: "[user@]host[:port][,...]" or "none"; overrides ssh_config ProxyJump

	// AcceptNewHostKey records the key of a host not yet in known_hosts
	// (StrictHostKeyChecking=accept-new). A changed key is refused regardless.
	AcceptNewHostKey bool
	// PasswordAuth allows password and keyboard-interactive authentication,
	// prompted for on the terminal (never in Batch mode).
	PasswordAuth bool
	// Batch forbids any terminal prompt (passphrases, passwords).
	Batch bool

	ConnectTimeout  time.Duration // default: ssh_config ConnectTimeout, else 15 s
	KnownHostsFiles []string      // replace every known_hosts file (the first is written to)

	// Stderr receives remote stderr (each line prefixed with the host),
	// server banners and warnings. Default os.Stderr.
	Stderr io.Writer
}

// DefaultConnectTimeout bounds the TCP connect and the SSH handshake of each
// hop, unless ConnectTimeout says otherwise. Time spent waiting for a
// passphrase or password typed at the terminal does not count.
const DefaultConnectTimeout = 15 * time.Second

// MaxParallelHandshakes is how many handshakes DialN runs at once: below
// sshd's default MaxStartups (10:30:100), beyond which sshd starts dropping
// unauthenticated connections.
const MaxParallelHandshakes = 8

// Sentinel errors; match them with errors.Is.
var (
	// ErrHostKeyUnknown: the host is not in known_hosts and accepting new
	// keys was not asked for.
	ErrHostKeyUnknown = errors.New("host key not known")
	// ErrHostKeyChanged: known_hosts has another key for the host.
	ErrHostKeyChanged = errors.New("host key changed")
	// ErrAuth: no authentication method worked (including an encrypted
	// identity file with no terminal to ask its passphrase).
	ErrAuth = errors.New("authentication failed")
	// ErrProtocol, ErrUnsupportedRemote and ErrUnsafeCache are
	// EnsureAgent's: see agentbin's.
	ErrProtocol          = agentbin.ErrProtocol
	ErrUnsupportedRemote = agentbin.ErrUnsupportedRemote
	ErrUnsafeCache       = agentbin.ErrUnsafeCache
)

// IsPermanent reports whether err is one that retrying the connection will
// not fix: a host key problem, an authentication failure, a protocol
// mismatch or an unsupported remote.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrHostKeyUnknown) || errors.Is(err, ErrHostKeyChanged) ||
		errors.Is(err, ErrAuth) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrUnsupportedRemote) ||
		errors.Is(err, ErrUnsafeCache)
}

// kindError is an error with its own message that matches a sentinel.
type kindError struct {
	kind error
	msg  string
	err  error // optional cause
}

func (e *kindError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *kindError) Unwrap() []error {
	if e.err != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.kind}
}

// ShellQuote quotes s as one word for a POSIX shell (and csh, for words
// without "!" or newlines): see shell.Quote.
func ShellQuote(s string) string { return shell.Quote(s) }
