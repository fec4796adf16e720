package sshx

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/term"
)

// terminal is where prompts go: the controlling terminal, like ssh's
// (/dev/tty, so prompts work even when stdin is a pipe).
type terminal interface {
	ReadPassword(prompt string) ([]byte, error) // without echo
	ReadLine(prompt string) (string, error)     // with echo
	Println(msg string)
	Close() error
}

// openTerminal opens the terminal for prompts; a variable so that tests can
// pretend there is one, or none.
var openTerminal = func() (terminal, error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if !term.IsTerminal(int(f.Fd())) {
		f.Close()
		return nil, errors.New("/dev/tty is not a terminal")
	}
	return ttyTerminal{f}, nil
}

type ttyTerminal struct{ f *os.File }

func (t ttyTerminal) ReadPassword(prompt string) ([]byte, error) {
	fmt.Fprint(t.f, prompt)
	b, err := term.ReadPassword(int(t.f.Fd()))
	fmt.Fprintln(t.f)
	return b, err
}

func (t ttyTerminal) ReadLine(prompt string) (string, error) {
	fmt.Fprint(t.f, prompt)
	var line []byte
	buf := make([]byte, 1)
	for {
		n, err := t.f.Read(buf)
		if n == 0 || err != nil || buf[0] == '\n' {
			break
		}
		line = append(line, buf[0])
	}
	return string(bytes.TrimSuffix(line, []byte("\r"))), nil
}

func (t ttyTerminal) Println(msg string) { fmt.Fprintln(t.f, msg) }
func (t ttyTerminal) Close() error       { return t.f.Close() }

func terminalAvailable() bool {
	t, err := openTerminal()
	if err != nil {
		return false
	}
	t.Close()
	return true
}

// promptMu serializes terminal prompts; the caches below make DialN's K
// connections ask once.
var (
	promptMu      sync.Mutex
	decryptedKeys = map[string]ssh.Signer{} // identity path -> signer
	failedKeys    = map[string]error{}      // identity path -> why it was given up
	passwords     = map[string]string{}     // user@host:port -> password
)

// defaultIdentities are tried when neither -i nor IdentityFile names one.
var defaultIdentities = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

type identity struct {
	path    string
	pub     ssh.PublicKey // nil if unknown (legacy encrypted PEM without .pub)
	signer  ssh.Signer    // nil if encrypted
	data    []byte        // the private key file, when encrypted
	certs   []*ssh.Certificate
	pubOnly bool // the file is a public key: usable only through the agent
}

type authSetup struct {
	methods []ssh.AuthMethod
	tried   []string // what was offered, for the error message
	notes   []string // why some identity was not usable
	closers []io.Closer
}

func (a *authSetup) close() {
	for _, c := range a.closers {
		c.Close()
	}
}

// buildAuth prepares ssh-agent keys, identity files and (if allowed)
// password authentication, in that order.
func buildAuth(s *settings, o *Options, w *watchdog, warn func(string)) *authSetup {
	a := &authSetup{}
	interactive := !s.Batch && terminalAvailable()

	// Identity files.
	var ids []*identity
	paths := s.IdentityFiles
	explicit := true
	if !s.IdentitiesGiven {
		explicit = false
		paths = nil
		for _, n := range defaultIdentities {
			paths = append(paths, filepath.Join(homeDir(), ".ssh", n))
		}
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		id, err := loadIdentity(p, s.CertificateFiles)
		if err != nil {
			if explicit {
				warn(fmt.Sprintf("identity file %s not usable: %v", p, err))
			}
			continue
		}
		ids = append(ids, id)
	}

	// Agent.
	var agentSigners []ssh.Signer
	agentOK := false
	sock := s.IdentityAgent
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if sock != "" && sock != "none" {
		conn, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			a.tried = append(a.tried, fmt.Sprintf("ssh-agent at %s (unreachable: %v)", sock, err))
		} else {
			a.closers = append(a.closers, conn)
			signers, err := agent.NewClient(conn).Signers()
			if err != nil {
				a.tried = append(a.tried, fmt.Sprintf("ssh-agent (listing keys: %v)", err))
			} else {
				agentSigners, agentOK = signers, true
			}
		}
	}

	inAgent := func(pub ssh.PublicKey) bool {
		if pub == nil {
			return false
		}
		for _, s := range agentSigners {
			if keysEqual(s.PublicKey(), pub) {
				return true
			}
		}
		return false
	}
	isIdentity := func(pub ssh.PublicKey) bool {
		for _, id := range ids {
			if id.pub != nil && keysEqual(id.pub, pub) {
				return true
			}
			for _, c := range id.certs {
				if keysEqual(c, pub) {
					return true
				}
			}
		}
		return false
	}

	var signers []ssh.Signer
	// Agent keys that are also configured identities first, then the other
	// agent keys (unless IdentitiesOnly).
	var agentUsed int
	for _, sg := range agentSigners {
		if isIdentity(sg.PublicKey()) {
			signers = append(signers, sg)
			agentUsed++
		}
	}
	for _, sg := range agentSigners {
		if !isIdentity(sg.PublicKey()) && !s.IdentitiesOnly {
			signers = append(signers, sg)
			agentUsed++
		}
	}
	if agentOK {
		a.tried = append(a.tried, fmt.Sprintf("ssh-agent (%d keys)", agentUsed))
	}

	// Then the identity files the agent does not hold.
	var fileNames []string
	for _, id := range ids {
		if inAgent(id.pub) {
			continue
		}
		if id.pubOnly {
			a.notes = append(a.notes, fmt.Sprintf("identity file %s is a public key whose private key the agent does not hold", id.path))
			continue
		}
		if id.signer != nil {
			for _, c := range id.certs {
				if cs, err := ssh.NewCertSigner(c, id.signer); err == nil {
					signers = append(signers, cs)
				}
			}
			signers = append(signers, id.signer)
			fileNames = append(fileNames, id.path)
			continue
		}
		// Encrypted.
		if !interactive {
			a.notes = append(a.notes, fmt.Sprintf(
				"identity file %s is encrypted and no terminal is available to ask its passphrase (use ssh-agent)", id.path))
			fileNames = append(fileNames, id.path+" (encrypted, not asked)")
			continue
		}
		load := func() (ssh.Signer, error) { return decryptIdentity(id, w) }
		if id.pub == nil {
			// No public half to offer first: ask now.
			sg, err := load()
			if err != nil {
				a.notes = append(a.notes, err.Error())
				continue
			}
			signers = append(signers, sg)
		} else {
			for _, c := range id.certs {
				signers = append(signers, &lazySigner{pub: c, load: func() (ssh.Signer, error) {
					sg, err := load()
					if err != nil {
						return nil, err
					}
					return ssh.NewCertSigner(c, sg)
				}})
			}
			signers = append(signers, &lazySigner{pub: id.pub, load: load})
		}
		fileNames = append(fileNames, id.path)
	}
	if len(fileNames) > 0 {
		a.tried = append(a.tried, "identity files "+strings.Join(fileNames, ", "))
	} else if len(ids) == 0 {
		if explicit {
			a.tried = append(a.tried, "no usable identity file")
		} else {
			a.tried = append(a.tried, "no identity file in ~/.ssh (id_ed25519, id_ecdsa, id_rsa)")
		}
	}
	if len(signers) > 0 {
		a.methods = append(a.methods, ssh.PublicKeys(signers...))
	}

	if o.PasswordAuth {
		if !interactive {
			a.tried = append(a.tried, "password (not asked: no terminal or batch mode)")
		} else {
			key := fmt.Sprintf("%s@%s:%d", s.User, s.HostName, s.Port)
			calls := 0
			ask := func(prompt string, echo bool) (string, error) {
				w.hold()
				defer w.release()
				promptMu.Lock()
				defer promptMu.Unlock()
				calls++
				if pw, ok := passwords[key]; ok && calls == 1 && !echo {
					return pw, nil
				}
				tty, err := openTerminal()
				if err != nil {
					return "", err
				}
				defer tty.Close()
				if echo {
					return tty.ReadLine(prompt)
				}
				ans, err := tty.ReadPassword(prompt)
				if err != nil {
					return "", err
				}
				passwords[key] = string(ans)
				return string(ans), nil
			}
			a.methods = append(a.methods,
				ssh.RetryableAuthMethod(ssh.KeyboardInteractive(func(name, instruction string, questions []string, echos []bool) ([]string, error) {
					answers := make([]string, len(questions))
					for i, q := range questions {
						ans, err := ask(q, echos[i])
						if err != nil {
							return nil, err
						}
						answers[i] = ans
					}
					return answers, nil
				}), 3),
				ssh.RetryableAuthMethod(ssh.PasswordCallback(func() (string, error) {
					return ask(fmt.Sprintf("%s@%s's password: ", s.User, s.HostName), false)
				}), 3))
			a.tried = append(a.tried, "password")
		}
	}
	return a
}

// loadIdentity reads an identity file: a private key (encrypted or not),
// or a public key whose private half only the agent holds.
func loadIdentity(path string, certFiles []string) (*identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errors.New("no such file")
		}
		return nil, err
	}
	id := &identity{path: path}
	raw, err := ssh.ParseRawPrivateKey(data)
	var pm *ssh.PassphraseMissingError
	switch {
	case err == nil:
		id.signer, err = ssh.NewSignerFromKey(raw)
		if err != nil {
			return nil, err
		}
		id.pub = id.signer.PublicKey()
	case errors.As(err, &pm):
		id.data = data
		id.pub = pm.PublicKey
		if id.pub == nil {
			if b, err := os.ReadFile(path + ".pub"); err == nil {
				if pub, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil {
					id.pub = pub
				}
			}
		}
	default:
		pub, _, _, _, perr := ssh.ParseAuthorizedKey(data)
		if perr != nil {
			return nil, fmt.Errorf("not a private key: %v", err)
		}
		id.pub, id.pubOnly = pub, true
	}
	for _, cf := range append([]string{path + "-cert.pub"}, certFiles...) {
		b, err := os.ReadFile(cf)
		if err != nil {
			continue
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			continue
		}
		if c, ok := pub.(*ssh.Certificate); ok && id.pub != nil && keysEqual(c.Key, id.pub) {
			id.certs = append(id.certs, c)
		}
	}
	return id, nil
}

// decryptIdentity asks for the passphrase of an encrypted identity on the
// terminal (up to three times, once per process).
func decryptIdentity(id *identity, w *watchdog) (ssh.Signer, error) {
	w.hold()
	defer w.release()
	promptMu.Lock()
	defer promptMu.Unlock()
	if sg, ok := decryptedKeys[id.path]; ok {
		return sg, nil
	}
	if err, ok := failedKeys[id.path]; ok {
		return nil, err
	}
	tty, err := openTerminal()
	if err != nil {
		err = fmt.Errorf("identity file %s is encrypted and no terminal is available to ask its passphrase (use ssh-agent)", id.path)
		failedKeys[id.path] = err
		return nil, err
	}
	defer tty.Close()
	for attempt := 0; attempt < 3; attempt++ {
		pw, err := tty.ReadPassword(fmt.Sprintf("Enter passphrase for key '%s': ", id.path))
		if err != nil {
			failedKeys[id.path] = err
			return nil, err
		}
		if len(pw) == 0 {
			break
		}
		sg, err := ssh.ParsePrivateKeyWithPassphrase(id.data, pw)
		if err == nil {
			decryptedKeys[id.path] = sg
			return sg, nil
		}
		if !errors.Is(err, x509.IncorrectPasswordError) {
			failedKeys[id.path] = fmt.Errorf("identity file %s: %w", id.path, err)
			return nil, failedKeys[id.path]
		}
		tty.Println("Bad passphrase, try again.")
	}
	err = fmt.Errorf("identity file %s: no correct passphrase given", id.path)
	failedKeys[id.path] = err
	return nil, err
}

// lazySigner offers a public key and decrypts the private key only if the
// server accepts it, as ssh does.
type lazySigner struct {
	pub  ssh.PublicKey
	load func() (ssh.Signer, error)
}

func (l *lazySigner) PublicKey() ssh.PublicKey { return l.pub }

func (l *lazySigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	sg, err := l.load()
	if err != nil {
		return nil, err
	}
	return sg.Sign(rand, data)
}

func (l *lazySigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	sg, err := l.load()
	if err != nil {
		return nil, err
	}
	as, ok := sg.(ssh.AlgorithmSigner)
	if !ok {
		if algorithm == "" || algorithm == underlyingType(l.pub) {
			return sg.Sign(rand, data)
		}
		return nil, fmt.Errorf("ssh: key cannot sign with %s", algorithm)
	}
	return as.SignWithAlgorithm(rand, data, algorithm)
}

func (l *lazySigner) Algorithms() []string {
	if t := underlyingType(l.pub); t == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSA}
	} else {
		return []string{t}
	}
}

func underlyingType(pub ssh.PublicKey) string {
	if c, ok := pub.(*ssh.Certificate); ok {
		return c.Key.Type()
	}
	return pub.Type()
}

func keysEqual(a, b ssh.PublicKey) bool {
	return a != nil && b != nil && bytes.Equal(a.Marshal(), b.Marshal())
}

func isAuthFailure(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "unable to authenticate") ||
		strings.Contains(m, "too many authentication") ||
		strings.Contains(m, "Too many authentication failures")
}

func authError(s *settings, a *authSetup, err error) error {
	msg := fmt.Sprintf("authentication as %s@%s failed (tried %s)", s.User, s.HostName, strings.Join(a.tried, "; "))
	if len(a.notes) > 0 {
		msg += ": " + strings.Join(a.notes, "; ")
	}
	return &kindError{kind: ErrAuth, msg: msg, err: err}
}
