// Package sshdtest starts a real OpenSSH sshd for tests: on 127.0.0.1, on a
// free port, with a throwaway configuration, host key, user key,
// authorized_keys and known_hosts line, all in a temporary directory that is
// removed when the test ends.
//
// Tests that need sshd skip (with a message naming the missing package) when
// openssh-server is not installed, unless the CI environment variable is set,
// in which case they fail.
//
// sshd logs in as the user running the test (root or not: as non-root, sshd
// runs unprivileged on its high port and can only log that same user in).
// The remote environment of every session can be chosen with WithEnv, which
// writes sshd's SetEnv directive: OpenSSH (checked with 9.2) lets it override
// both PATH and HOME. The session's working directory stays the user's
// passwd home directory whatever HOME says.
package sshdtest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Server is a running sshd.
type Server struct {
	// Dir is the server's temporary directory (config, keys, log).
	Dir string
	// Host is "127.0.0.1" (or WithNetns's address); Port is the port sshd
	// listens on; Addr is Host:Port.
	Host string
	Port int
	Addr string
	// User is the account sshd lets in (the user running the test).
	User string
	// HostKey is the server's ed25519 host key, and HostKeyLine its
	// authorized_keys form ("ssh-ed25519 AAAA...").
	HostKey     ssh.PublicKey
	HostKeyLine string
	// KnownHostsFile holds one line, KnownHostsLine(), for this server.
	KnownHostsFile string
	// UserKey is the path of an unencrypted private key that sshd accepts
	// (in OpenSSH format, with UserKey+".pub" next to it), and UserSigner the
	// same key.
	UserKey    string
	UserSigner ssh.Signer
	// ConfigFile is the sshd_config in use.
	ConfigFile string

	tb   testing.TB
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	stop sync.Once
}

type config struct {
	maxStartups    string
	maxSessions    int
	env            []string
	userKey        string
	authorizedKeys []string
	extra          []string
	hostKeyPEM     []byte
	noSFTP         bool
	netns, host    string
}

// Option changes how Start configures sshd.
type Option func(*config)

// WithMaxStartups sets sshd's MaxStartups (for example "2" or "2:100:2":
// beyond that many unauthenticated connections, new ones are dropped).
func WithMaxStartups(spec string) Option { return func(c *config) { c.maxStartups = spec } }

// WithMaxSessions sets sshd's MaxSessions (sessions per connection).
func WithMaxSessions(n int) Option { return func(c *config) { c.maxSessions = n } }

// WithEnv sets environment variables ("NAME=value") in every session, through
// sshd's SetEnv directive. PATH and HOME can be overridden this way:
//
//	sshdtest.WithEnv("PATH=/tmp/bin:/usr/bin:/bin", "HOME="+t.TempDir())
func WithEnv(kv ...string) Option { return func(c *config) { c.env = append(c.env, kv...) } }

// WithUserKey uses an existing private key file (with path+".pub" next to
// it, or unencrypted) as the server's UserKey instead of generating one, so
// that several servers accept the same key.
func WithUserKey(path string) Option { return func(c *config) { c.userKey = path } }

// WithAuthorizedKeys adds lines to authorized_keys (besides UserKey's).
func WithAuthorizedKeys(lines ...string) Option {
	return func(c *config) { c.authorizedKeys = append(c.authorizedKeys, lines...) }
}

// WithoutSFTP leaves out the sftp subsystem.
func WithoutSFTP() Option { return func(c *config) { c.noSFTP = true } }

// WithConfig adds raw lines to sshd_config. They are written first, so they
// take precedence over Start's own settings (sshd keeps the first value of a
// keyword); a Match block does not belong here.
func WithConfig(lines ...string) Option {
	return func(c *config) { c.extra = append(c.extra, lines...) }
}

// WithNetns runs sshd in the network namespace ns (ip netns exec, as
// root), listening on host, an address it has there: a host of its own
// for a test of more than one machine.
func WithNetns(ns, host string) Option { return func(c *config) { c.netns, c.host = ns, host } }

// WithHostKey uses the given OpenSSH-format private key (PEM bytes) as the
// host key instead of generating one.
func WithHostKey(pemBytes []byte) Option { return func(c *config) { c.hostKeyPEM = pemBytes } }

// SSHDPath returns the sshd binary, or "" if openssh-server is not installed.
func SSHDPath() string {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("sshd"); err == nil {
		return p
	}
	return ""
}

// SFTPServerPath returns the sftp-server binary, or "" if none is found.
func SFTPServerPath() string {
	for _, p := range []string{
		"/usr/lib/openssh/sftp-server",
		"/usr/libexec/openssh/sftp-server",
		"/usr/libexec/sftp-server",
		"/usr/lib/ssh/sftp-server",
		"/usr/local/libexec/sftp-server",
	} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

// Require skips the test (or fails it when $CI is set) if the named
// programs or sshd are missing. name is what to print, e.g. "ssh-agent".
func Require(tb testing.TB, programs ...string) {
	tb.Helper()
	var missing []string
	for _, p := range programs {
		if p == "sshd" {
			if SSHDPath() == "" {
				missing = append(missing, "sshd (apt-get install openssh-server)")
			}
			continue
		}
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p+" (apt-get install openssh-client)")
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "not installed: " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// Start starts sshd and stops it when the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	sshd := SSHDPath()
	if sshd == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("sshd not installed: apt-get install openssh-server")
		}
		tb.Skip("sshd not installed: apt-get install openssh-server")
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	dir := tb.TempDir()
	s := &Server{Dir: dir, Host: "127.0.0.1", tb: tb}
	if c.host != "" {
		s.Host = c.host
	}

	u, err := user.Current()
	if err != nil {
		tb.Fatalf("sshdtest: current user: %v", err)
	}
	s.User = u.Username

	// Host key.
	hostPEM := c.hostKeyPEM
	if hostPEM == nil {
		hostPEM = NewKeyPEM(tb, "")
	}
	hostKeyPath := filepath.Join(dir, "ssh_host_ed25519_key")
	mustWrite(tb, hostKeyPath, hostPEM, 0o600)
	hostSigner, err := ssh.ParsePrivateKey(hostPEM)
	if err != nil {
		tb.Fatalf("sshdtest: host key: %v", err)
	}
	s.HostKey = hostSigner.PublicKey()
	s.HostKeyLine = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey)))

	// User key.
	if c.userKey != "" {
		s.UserKey = c.userKey
	} else {
		s.UserKey = filepath.Join(dir, "id_ed25519")
		WriteKey(tb, s.UserKey, "")
	}
	pub, signer := readKey(tb, s.UserKey)
	s.UserSigner = signer
	ak := string(ssh.MarshalAuthorizedKey(pub))
	for _, l := range c.authorizedKeys {
		ak += strings.TrimSpace(l) + "\n"
	}
	akPath := filepath.Join(dir, "authorized_keys")
	mustWrite(tb, akPath, []byte(ak), 0o600)

	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755)
	}

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("sshdtest: free port: %v", err)
		}
		s.Port = port
		s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(port))
		s.ConfigFile = filepath.Join(dir, "sshd_config")
		mustWrite(tb, s.ConfigFile, []byte(s.sshdConfig(&c, hostKeyPath, akPath)), 0o644)
		if lastErr = s.run(sshd, c.netns); lastErr == nil {
			break
		}
		if !strings.Contains(lastErr.Error(), "Address already in use") {
			break
		}
	}
	if lastErr != nil {
		tb.Fatalf("sshdtest: %v", lastErr)
	}

	s.KnownHostsFile = filepath.Join(dir, "known_hosts")
	mustWrite(tb, s.KnownHostsFile, []byte(s.KnownHostsLine()+"\n"), 0o600)
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("sshd log (%s):\n%s", s.Addr, s.Log())
		}
	})
	return s
}

func (s *Server) sshdConfig(c *config, hostKeyPath, akPath string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	// sshd keeps the first value of a keyword: extra lines go first.
	for _, l := range c.extra {
		w("%s", l)
	}
	w("ListenAddress %s", s.Host)
	w("Port %d", s.Port)
	w("HostKey %s", hostKeyPath)
	w("PidFile %s", filepath.Join(s.Dir, "sshd.pid"))
	w("AuthorizedKeysFile %s", akPath)
	w("UsePAM no")
	w("StrictModes no")
	w("PermitRootLogin prohibit-password")
	w("PasswordAuthentication no")
	w("KbdInteractiveAuthentication no")
	w("AllowTcpForwarding yes")
	w("LogLevel VERBOSE")
	w("PrintMotd no")
	w("Banner none")
	if !c.noSFTP {
		if p := SFTPServerPath(); p != "" {
			w("Subsystem sftp %s", p)
		} else {
			w("Subsystem sftp internal-sftp")
		}
	}
	if c.maxStartups != "" {
		w("MaxStartups %s", c.maxStartups)
	}
	if c.maxSessions > 0 {
		w("MaxSessions %d", c.maxSessions)
	}
	if len(c.env) > 0 {
		var q []string
		for _, kv := range c.env {
			q = append(q, `"`+strings.ReplaceAll(kv, `"`, `\"`)+`"`)
		}
		w("SetEnv %s", strings.Join(q, " "))
	}
	return b.String()
}

func (s *Server) run(sshd, netns string) error {
	cmd := exec.Command(sshd, "-D", "-e", "-f", s.ConfigFile)
	if netns != "" {
		// ip execs sshd in the namespace: the process is sshd.
		cmd = exec.Command("ip", "netns", "exec", netns, sshd, "-D", "-e", "-f", s.ConfigFile)
	}
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// An *os.File, not an io.Writer: the per-connection sshd children
	// inherit it, and cmd.Wait must not wait for them to close it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	s.log = &syncBuffer{}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return fmt.Errorf("start %s: %w", sshd, err)
	}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			s.log.WriteString(line + "\n")
			if strings.Contains(line, "Server listening on") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		pr.Close()
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		return fmt.Errorf("sshd exited at start:\n%s", s.log.String())
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("sshd did not start listening within 10s:\n%s", s.log.String())
	}
	s.cmd = cmd
	s.done = exited
	return nil
}

// Stop stops sshd (the listener; sessions already open end when their
// clients disconnect). It is called automatically when the test ends.
func (s *Server) Stop() {
	s.stop.Do(func() {
		if s.cmd == nil {
			return
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		// Per-connection sshd children are in the same process group.
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	})
}

// Log returns what sshd has logged so far.
func (s *Server) Log() string { return s.log.String() }

// KnownHostsName is how known_hosts names this server: "[127.0.0.1]:PORT".
func (s *Server) KnownHostsName() string {
	return fmt.Sprintf("[%s]:%d", s.Host, s.Port)
}

// KnownHostsLine is a known_hosts line for this server's host key.
func (s *Server) KnownHostsLine() string {
	return s.KnownHostsName() + " " + s.HostKeyLine
}

// TrustPort adds to the server's known_hosts file a line naming its host
// key at [Host]:port as well: the port of a proxy in front of it.
func (s *Server) TrustPort(tb testing.TB, port int) {
	tb.Helper()
	kh, err := os.OpenFile(s.KnownHostsFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer kh.Close()
	if _, err := fmt.Fprintf(kh, "[%s]:%d %s\n", s.Host, port, s.HostKeyLine); err != nil {
		tb.Fatal(err)
	}
}

// WriteSSHConfig writes an ssh_config file with a "Host alias" block that
// reaches this server (HostName, Port, User, IdentityFile,
// UserKnownHostsFile, StrictHostKeyChecking yes), followed by the extra lines
// (written as they are, after the block), and returns its path.
func (s *Server) WriteSSHConfig(alias string, extra ...string) string {
	s.tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "Host %s\n", alias)
	fmt.Fprintf(&b, "  HostName %s\n", s.Host)
	fmt.Fprintf(&b, "  Port %d\n", s.Port)
	fmt.Fprintf(&b, "  User %s\n", s.User)
	fmt.Fprintf(&b, "  IdentityFile %s\n", s.UserKey)
	fmt.Fprintf(&b, "  UserKnownHostsFile %s\n", s.KnownHostsFile)
	fmt.Fprintf(&b, "  StrictHostKeyChecking yes\n")
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	f, err := os.CreateTemp(s.Dir, "ssh_config-*")
	if err != nil {
		s.tb.Fatal(err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		s.tb.Fatal(err)
	}
	f.Close()
	return f.Name()
}

// NewKeyPEM generates an ed25519 private key in OpenSSH format, encrypted
// with passphrase if it is not empty.
func NewKeyPEM(tb testing.TB, passphrase string) []byte {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "sshdtest")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "sshdtest", []byte(passphrase))
	}
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// WriteKey writes a new ed25519 key to path (0600) and its public half to
// path+".pub", encrypted with passphrase if not empty, and returns the public
// key.
func WriteKey(tb testing.TB, path, passphrase string) ssh.PublicKey {
	tb.Helper()
	pemBytes := NewKeyPEM(tb, passphrase)
	mustWrite(tb, path, pemBytes, 0o600)
	var pub ssh.PublicKey
	if passphrase == "" {
		s, err := ssh.ParsePrivateKey(pemBytes)
		if err != nil {
			tb.Fatal(err)
		}
		pub = s.PublicKey()
	} else {
		s, err := ssh.ParsePrivateKeyWithPassphrase(pemBytes, []byte(passphrase))
		if err != nil {
			tb.Fatal(err)
		}
		pub = s.PublicKey()
	}
	mustWrite(tb, path+".pub", ssh.MarshalAuthorizedKey(pub), 0o644)
	return pub
}

// readKey returns the public key of a private key file (from the file or
// path+".pub") and a signer if the key is not encrypted.
func readKey(tb testing.TB, path string) (ssh.PublicKey, ssh.Signer) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("sshdtest: user key: %v", err)
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err == nil {
		return signer.PublicKey(), signer
	}
	if pm, ok := err.(*ssh.PassphraseMissingError); ok && pm.PublicKey != nil {
		return pm.PublicKey, nil
	}
	pubData, perr := os.ReadFile(path + ".pub")
	if perr != nil {
		tb.Fatalf("sshdtest: user key %s: %v", path, err)
	}
	pub, _, _, _, perr := ssh.ParseAuthorizedKey(pubData)
	if perr != nil {
		tb.Fatalf("sshdtest: %s.pub: %v", path, perr)
	}
	return pub, nil
}

func mustWrite(tb testing.TB, path string, data []byte, mode os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	b.b.WriteString(s)
	b.mu.Unlock()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
