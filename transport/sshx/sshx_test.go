package sshx

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"golang.org/x/crypto/ssh"
)

// syncBuffer is a Stderr that tests can read while connections write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// direct returns a target and options that reach srv with its key and
// known_hosts line, in batch mode.
func direct(srv *sshdtest.Server) (Target, Options) {
	return Target{Host: "127.0.0.1", Port: srv.Port, User: srv.User},
		Options{
			Identities:      []string{srv.UserKey},
			KnownHostsFiles: []string{srv.KnownHostsFile},
			Batch:           true,
			Stderr:          &syncBuffer{},
		}
}

func mustDial(t *testing.T, tg Target, o Options) *Client {
	t.Helper()
	c, err := Dial(testCtx(t), tg, o)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func checkEcho(t *testing.T, c *Client) {
	t.Helper()
	out, err := c.Output(testCtx(t), "echo hello")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("Output(echo hello) = %q, %v", out, err)
	}
}

func TestConnectWithKey(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)
	stderr := o.Stderr.(*syncBuffer)
	c := mustDial(t, tg, o)
	checkEcho(t, c)
	// Over loopback the kernel's round trip is microseconds: a near path.
	if rtt, ok := c.PathRTT(); runtime.GOOS == "linux" && (!ok || rtt <= 0 || rtt >= 10*time.Millisecond) {
		t.Errorf("PathRTT over loopback = %v, %v; want a few microseconds", rtt, ok)
	}

	// A session: stdin to stdout through cat, then EOF, then exit status.
	ctx := testCtx(t)
	s, err := c.Start(ctx, "cat; echo to-stderr >&2")
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, more than a window
	go func() {
		s.Write(payload)
		s.CloseWrite()
	}()
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("cat returned %d bytes (%v), want %d", len(got), err, len(payload))
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if want := "127.0.0.1: to-stderr\n"; stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}

	// A failing command: its status and stderr are in the error.
	s, err = c.Start(ctx, "echo 'bulkmove: disk full on /data' >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Wait()
	var xe *ExitError
	if !errors.As(err, &xe) || xe.Status != 3 || !strings.Contains(err.Error(), "disk full on /data") {
		t.Fatalf("Wait = %v, want exit status 3 with the stderr line", err)
	}
	var sshExit *ssh.ExitError
	if !errors.As(err, &sshExit) {
		t.Error("ExitError does not unwrap to *ssh.ExitError")
	}
	if _, err := c.Output(ctx, "echo oops >&2; false"); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("Output of a failing command: %v", err)
	}

	// Cancelling the context kills the remote command.
	cctx, cancel := context.WithCancel(ctx)
	s, err = c.Start(cctx, "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if err := s.Wait(); err == nil {
		t.Error("Wait after cancel: no error")
	}
	if time.Since(start) > 10*time.Second {
		t.Error("cancel did not stop the command")
	}
	// The connection is still usable.
	checkEcho(t, c)

	// Output with a context that ends returns at once.
	octx, ocancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start = time.Now()
	_, err = c.Output(octx, "sleep 30")
	ocancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 15*time.Second { // not sleep's 30 s
		t.Errorf("Output past its deadline = %v after %v", err, time.Since(start))
	}
	// Close, then Wait: returns at once.
	s, err = c.Start(ctx, "sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	start = time.Now()
	if err := s.Wait(); !errors.Is(err, errSessionClosed) || time.Since(start) > 15*time.Second { // not sleep's 30 s
		t.Errorf("Wait after Close = %v after %v", err, time.Since(start))
	}
	checkEcho(t, c)
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestNegotiatedCipher: against OpenSSH's sshd the connection carries
// its bytes with aes128-gcm@openssh.com where the CPU has AES
// instructions (its sealing costs sshd and us least there), and
// chacha20-poly1305 where it has not: an AEAD either way, no separate MAC.
func TestNegotiatedCipher(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)
	c := mustDial(t, tg, o)
	want := "chacha20-poly1305@openssh.com"
	if hasAESHardware() {
		want = "aes128-gcm@openssh.com"
	}
	am, ok := c.SSH().Conn.(ssh.AlgorithmsConnMetadata)
	if !ok {
		t.Fatal("the client connection does not report its algorithms")
	}
	algs := am.Algorithms()
	for dir, a := range map[string]ssh.DirectionAlgorithms{"to sshd": algs.Write, "from sshd": algs.Read} {
		if a.Cipher != want {
			t.Errorf("cipher %s = %q, want %q", dir, a.Cipher, want)
		}
	}
}

func TestUnknownHostRefused(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)
	o.KnownHostsFiles = []string{filepath.Join(t.TempDir(), "known_hosts")}
	_, err := Dial(testCtx(t), tg, o)
	if !errors.Is(err, ErrHostKeyUnknown) || !IsPermanent(err) {
		t.Fatalf("Dial = %v, want ErrHostKeyUnknown", err)
	}
	for _, want := range []string{
		"ssh 127.0.0.1: host key for 127.0.0.1 ([127.0.0.1]:" + strconv.Itoa(srv.Port) + ") is not known",
		fmt.Sprintf(`run "ssh -p %d %s@127.0.0.1" once`, srv.Port, srv.User),
		"--accept-new-host-key",
		ssh.FingerprintSHA256(srv.HostKey),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
	if _, serr := os.Stat(o.KnownHostsFiles[0]); serr == nil {
		t.Error("known_hosts was written without accept-new")
	}
}

func TestAcceptNewRecords(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)
	kh := filepath.Join(t.TempDir(), "newdir", "known_hosts")
	o.KnownHostsFiles = []string{kh}
	o.AcceptNewHostKey = true
	// Several connections at once record the key once.
	clients, errs, err := DialN(testCtx(t), tg, o, 4)
	if err != nil || len(clients) != 4 {
		t.Fatalf("DialN with accept-new: %d clients, %v, %v", len(clients), errs, err)
	}
	for _, c := range clients {
		c.Close()
	}
	data, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != srv.KnownHostsLine()+"\n" {
		t.Errorf("known_hosts = %q, want %q", data, srv.KnownHostsLine()+"\n")
	}
	if fi, err := os.Stat(filepath.Dir(kh)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("known_hosts directory mode: %v %v", fi.Mode(), err)
	}
	if !strings.Contains(o.Stderr.(*syncBuffer).String(), "Permanently added") {
		t.Errorf("no notice of the recorded key: %q", o.Stderr.(*syncBuffer).String())
	}
	// Now known, without accept-new.
	o.AcceptNewHostKey = false
	checkEcho(t, mustDial(t, tg, o))

	// StrictHostKeyChecking accept-new and HashKnownHosts from a config file.
	kh2 := filepath.Join(t.TempDir(), "known_hosts")
	cfg := writeFile(t, filepath.Join(t.TempDir(), "config"), fmt.Sprintf(
		"Host hashed\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n"+
			"  StrictHostKeyChecking accept-new\n  HashKnownHosts yes\n", srv.Port, srv.User, srv.UserKey, kh2))
	o2 := Options{ConfigFile: cfg, Batch: true, Stderr: &syncBuffer{}}
	checkEcho(t, mustDial(t, Target{Host: "hashed"}, o2))
	data, _ = os.ReadFile(kh2)
	if !strings.HasPrefix(string(data), "|1|") || !strings.Contains(string(data), srv.HostKeyLine) {
		t.Errorf("hashed known_hosts = %q", data)
	}
	// The hashed entry is found again, with accept-new off.
	o2.ConfigFile = writeFile(t, filepath.Join(t.TempDir(), "config"), fmt.Sprintf(
		"Host hashed\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n",
		srv.Port, srv.User, srv.UserKey, kh2))
	checkEcho(t, mustDial(t, Target{Host: "hashed"}, o2))
	if data2, _ := os.ReadFile(kh2); !bytes.Equal(data, data2) {
		t.Errorf("known_hosts changed on the second connection: %q", data2)
	}
}

func TestChangedHostKeyRefused(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)
	other := sshdtest.WriteKey(t, filepath.Join(t.TempDir(), "other"), "")
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := srv.KnownHostsName() + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other))) + "\n"
	writeFile(t, kh, line)
	o.KnownHostsFiles = []string{kh}
	for _, acceptNew := range []bool{false, true} {
		o.AcceptNewHostKey = acceptNew
		_, err := Dial(testCtx(t), tg, o)
		if !errors.Is(err, ErrHostKeyChanged) || !IsPermanent(err) {
			t.Fatalf("accept-new=%v: Dial = %v, want ErrHostKeyChanged", acceptNew, err)
		}
		for _, want := range []string{"WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED for 127.0.0.1",
			"refusing to connect", ssh.FingerprintSHA256(srv.HostKey), kh + ":1", "ssh-keygen -R"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\ndoes not contain %q", err, want)
			}
		}
	}
	if data, _ := os.ReadFile(kh); string(data) != line {
		t.Errorf("known_hosts was modified: %q", data)
	}

	// A revoked key.
	writeFile(t, kh, srv.KnownHostsLine()+"\n@revoked * "+srv.HostKeyLine+"\n")
	if _, err := Dial(testCtx(t), tg, o); !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), "@revoked") {
		t.Errorf("revoked key: Dial = %v", err)
	}

	// A known key of another type than the server's also counts as changed
	// (not as unknown), like OpenSSH.
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rpub, err := ssh.NewPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, kh, srv.KnownHostsName()+" "+string(ssh.MarshalAuthorizedKey(rpub)))
	o.AcceptNewHostKey = true
	if _, err := Dial(testCtx(t), tg, o); !errors.Is(err, ErrHostKeyChanged) {
		t.Errorf("known rsa key, server ed25519: Dial = %v, want ErrHostKeyChanged", err)
	}
}

func startAgent(t *testing.T, keys ...string) string {
	t.Helper()
	sshdtest.Require(t, "ssh-agent", "ssh-add")
	dir, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "sock")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 200 {
			t.Fatalf("ssh-agent did not create %s: %s", sock, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range keys {
		add := exec.Command("ssh-add", k)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if b, err := add.CombinedOutput(); err != nil {
			t.Fatalf("ssh-add %s: %v: %s", k, err, b)
		}
	}
	return sock
}

func TestAgentAuth(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)
	o.Identities = nil // nothing but the agent (and HOME has no ~/.ssh)

	// No agent, no keys: a clear authentication error.
	_, err := Dial(testCtx(t), tg, o)
	if !errors.Is(err, ErrAuth) || !IsPermanent(err) {
		t.Fatalf("Dial without keys = %v, want ErrAuth", err)
	}
	for _, want := range []string{"authentication as " + srv.User + "@127.0.0.1 failed", "no identity file in ~/.ssh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}

	sock := startAgent(t, srv.UserKey)
	t.Setenv("SSH_AUTH_SOCK", sock)
	checkEcho(t, mustDial(t, tg, o))

	// IdentityAgent none in the config turns it off again.
	cfg := writeFile(t, filepath.Join(t.TempDir(), "config"), "Host *\n  IdentityAgent none\n")
	o.ConfigFile = cfg
	if _, err := Dial(testCtx(t), tg, o); !errors.Is(err, ErrAuth) {
		t.Errorf("IdentityAgent none: Dial = %v, want ErrAuth", err)
	}
	// IdentitiesOnly with an IdentityFile the agent holds (only its .pub
	// on disk) uses that agent key.
	pubOnly := filepath.Join(t.TempDir(), "agentkey.pub")
	b, _ := os.ReadFile(srv.UserKey + ".pub")
	writeFile(t, pubOnly, string(b))
	o.ConfigFile = writeFile(t, filepath.Join(t.TempDir(), "config"), "Host *\n  IdentitiesOnly yes\n  IdentityFile "+pubOnly+"\n")
	checkEcho(t, mustDial(t, tg, o))
}

type fakeTerminal struct {
	passphrase string
	asked      *atomic.Int32
}

func (f fakeTerminal) ReadPassword(prompt string) ([]byte, error) {
	f.asked.Add(1)
	return []byte(f.passphrase), nil
}
func (f fakeTerminal) ReadLine(prompt string) (string, error) { return "", errors.New("unexpected") }
func (f fakeTerminal) Println(string)                         {}
func (f fakeTerminal) Close() error                           { return nil }

func TestEncryptedKey(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id_enc")
	pub := sshdtest.WriteKey(t, key, "secret passphrase")
	srv := sshdtest.Start(t, sshdtest.WithAuthorizedKeys(string(ssh.MarshalAuthorizedKey(pub))))
	tg, o := direct(srv)
	o.Identities = []string{key}

	// Batch mode: never asks, and says why.
	_, err := Dial(testCtx(t), tg, o)
	want := "identity file " + key + " is encrypted and no terminal is available to ask its passphrase (use ssh-agent)"
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), want) {
		t.Fatalf("batch mode: Dial = %v\nwant ErrAuth mentioning %q", err, want)
	}

	// Interactive, no terminal: the same.
	o.Batch = false
	if _, err := Dial(testCtx(t), tg, o); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), want) {
		t.Fatalf("no terminal: Dial = %v", err)
	}

	// With a terminal: asked once for all connections.
	var asked atomic.Int32
	saved := openTerminal
	openTerminal = func() (terminal, error) { return fakeTerminal{"secret passphrase", &asked}, nil }
	t.Cleanup(func() { openTerminal = saved })
	clients, errs, err := DialN(testCtx(t), tg, o, 3)
	if err != nil || len(clients) != 3 {
		t.Fatalf("DialN with a passphrase: %v %v", errs, err)
	}
	for _, c := range clients {
		c.Close()
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("passphrase asked %d times, want 1", n)
	}

	// And in the agent, the file's encryption does not matter even in batch.
	openTerminal = saved
	o.Batch = true
	sock := startAgent(t)
	add := exec.Command("ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock, "SSH_ASKPASS_REQUIRE=force", "SSH_ASKPASS="+writeAskpass(t, "secret passphrase"), "DISPLAY=x")
	add.Stdin = nil
	if b, err := add.CombinedOutput(); err != nil {
		t.Logf("ssh-add of an encrypted key not possible here (%v: %s); skipping the agent part", err, b)
		return
	}
	t.Setenv("SSH_AUTH_SOCK", sock)
	checkEcho(t, mustDial(t, tg, o))
}

func writeAskpass(t *testing.T, pass string) string {
	p := filepath.Join(t.TempDir(), "askpass")
	writeFile(t, p, "#!/bin/sh\necho '"+pass+"'\n")
	os.Chmod(p, 0o755)
	return p
}

func TestProxyJump(t *testing.T) {
	jump := sshdtest.Start(t)
	jump2 := sshdtest.Start(t, sshdtest.WithUserKey(jump.UserKey))
	target := sshdtest.Start(t, sshdtest.WithUserKey(jump.UserKey))
	kh := writeFile(t, filepath.Join(t.TempDir(), "known_hosts"),
		jump.KnownHostsLine()+"\n"+jump2.KnownHostsLine()+"\n"+target.KnownHostsLine()+"\n")
	tg, o := direct(target)
	o.KnownHostsFiles = []string{kh}

	// -J user@host:port
	o.Jump = fmt.Sprintf("%s@127.0.0.1:%d", jump.User, jump.Port)
	checkEcho(t, mustDial(t, tg, o))
	// Two hops.
	o.Jump = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", jump.Port, jump2.Port)
	c := mustDial(t, tg, o)
	checkEcho(t, c)
	if len(c.hops) != 2 {
		t.Errorf("%d hops, want 2", len(c.hops))
	}
	// Through jump hosts this host sees no TCP connection to the target.
	if rtt, ok := c.PathRTT(); ok {
		t.Errorf("PathRTT through jump hosts = %v, want none", rtt)
	}

	// ProxyJump from the config, with the jump host's own Host block.
	cfg := writeFile(t, filepath.Join(t.TempDir(), "config"), fmt.Sprintf(`
Host target
  HostName 127.0.0.1
  Port %d
  ProxyJump bastion
Host bastion
  HostName 127.0.0.1
  Port %d
Host *
  IdentityFile %s
  UserKnownHostsFile %s
`, target.Port, jump.Port, jump.UserKey, kh))
	o2 := Options{ConfigFile: cfg, Batch: true, Stderr: &syncBuffer{}}
	checkEcho(t, mustDial(t, Target{Host: "target"}, o2))

	// ProxyCommand, here OpenSSH's own ssh -W through the jump host; the
	// tokens of an ordinary name reach it as they are.
	if _, err := exec.LookPath("ssh"); err == nil {
		cfg := writeFile(t, filepath.Join(t.TempDir(), "config"), fmt.Sprintf(`
Host viacmd
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s
  UserKnownHostsFile %s
  ProxyCommand test %%n = viacmd && test %%r = %s && exec ssh -F none -o BatchMode=yes -o UserKnownHostsFile=%s -i %s -p %d -W %%h:%%p %s@127.0.0.1
`, target.Port, target.User, jump.UserKey, kh, target.User, kh, jump.UserKey, jump.Port, jump.User))
		checkEcho(t, mustDial(t, Target{Host: "viacmd"}, Options{ConfigFile: cfg, Batch: true, Stderr: &syncBuffer{}}))
	}

	// The jump is really used: a jump host that forbids forwarding fails it.
	noFwd := sshdtest.Start(t, sshdtest.WithUserKey(jump.UserKey), sshdtest.WithConfig("PermitOpen none"))
	writeFile(t, kh, jump.KnownHostsLine()+"\n"+target.KnownHostsLine()+"\n"+noFwd.KnownHostsLine()+"\n")
	o.Jump = fmt.Sprintf("127.0.0.1:%d", noFwd.Port)
	_, err := Dial(testCtx(t), tg, o)
	if err == nil || !strings.Contains(err.Error(), "through jump host") {
		t.Errorf("through a jump host with PermitOpen none: %v", err)
	}
	// An unknown jump host is refused with its own hint.
	writeFile(t, kh, target.KnownHostsLine()+"\n")
	o.Jump = fmt.Sprintf("127.0.0.1:%d", jump.Port)
	_, err = Dial(testCtx(t), tg, o)
	if !errors.Is(err, ErrHostKeyUnknown) || !strings.Contains(err.Error(), "jump host 127.0.0.1") {
		t.Errorf("unknown jump host: %v", err)
	}
}

func TestFlagsAndConfigFile(t *testing.T) {
	srv := sshdtest.Start(t)
	// -p and -i.
	o := Options{Port: srv.Port, Identities: []string{srv.UserKey}, KnownHostsFiles: []string{srv.KnownHostsFile},
		Batch: true, Stderr: &syncBuffer{}}
	checkEcho(t, mustDial(t, Target{Host: "127.0.0.1", User: srv.User}, o))

	// -F with a Host alias, a Match block, an unknown keyword.
	cfg := srv.WriteSSHConfig("box2",
		"  SomeFutureKeyword yes please",
		"Match exec \"exit 1\"",
		"  Port 1",
		"Match host 127.0.0.1 user "+srv.User,
		"  ConnectTimeout 5",
		"Match final",
		"  ServerAliveInterval 10",
		"Host *",
		"  Port 2",
		"  IdentityFile /nonexistent/key",
	)
	o = Options{ConfigFile: cfg, Batch: true, Stderr: &syncBuffer{}}
	c := mustDial(t, Target{Host: "box2"}, o)
	checkEcho(t, c)
	if c.s.ConnectTimeout != 5*time.Second || c.s.ServerAliveInterval != 10*time.Second || c.HostName() != "127.0.0.1" {
		t.Errorf("settings from -F: %+v", c.s)
	}
	if w := o.Stderr.(*syncBuffer).String(); !strings.Contains(w, "/nonexistent/key not usable") {
		t.Errorf("no warning about the missing IdentityFile: %q", w)
	}

	// -p overrides the config's Port.
	bad := writeFile(t, filepath.Join(t.TempDir(), "config"), fmt.Sprintf(
		"Host box3\n  HostName 127.0.0.1\n  Port 1\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n",
		srv.User, srv.UserKey, srv.KnownHostsFile))
	o = Options{ConfigFile: bad, Batch: true, Stderr: &syncBuffer{}}
	if _, err := Dial(testCtx(t), Target{Host: "box3"}, o); err == nil || !strings.Contains(err.Error(), "ssh box3: dial tcp 127.0.0.1:1:") {
		t.Errorf("wrong port from the config: %v", err)
	}
	o.Port = srv.Port
	checkEcho(t, mustDial(t, Target{Host: "box3"}, o))
}

// proxy is a TCP forwarder that can refuse connections or freeze.
type proxy struct {
	l      net.Listener
	target string
	count  atomic.Int32
	refuse func(i int) bool
	frozen atomic.Bool
	done   chan struct{}
}

func startProxy(t *testing.T, target string, refuse func(i int) bool) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, refuse: refuse, done: make(chan struct{})}
	t.Cleanup(func() { close(p.done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			i := int(p.count.Add(1))
			if p.refuse != nil && p.refuse(i) {
				c.Close()
				continue
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *proxy) serve(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if p.frozen.Load() {
				<-p.done // a dead link: nothing gets through any more
				dst.Close()
				src.Close()
				return
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	go pipe(s, c)
	go pipe(c, s)
}

func TestDialN(t *testing.T) {
	srv := sshdtest.Start(t)
	tg, o := direct(srv)

	// Six separate TCP connections.
	clients, errs, err := DialN(testCtx(t), tg, o, 6)
	if err != nil || len(clients) != 6 || len(errs) != 0 {
		t.Fatalf("DialN(6) = %d clients, %v, %v", len(clients), errs, err)
	}
	ports := map[string]bool{}
	for _, c := range clients {
		ports[c.SSH().LocalAddr().String()] = true
		checkEcho(t, c)
		c.Close()
	}
	if len(ports) != 6 {
		t.Errorf("%d distinct local addresses, want 6", len(ports))
	}

	// Every other connection refused: the others are returned.
	p := startProxy(t, srv.Addr, func(i int) bool { return i%2 == 0 })
	writeFile(t, o.KnownHostsFiles[0], fmt.Sprintf("[127.0.0.1]:%d %s\n", p.port(), srv.HostKeyLine))
	tg.Port = p.port()
	clients, errs, err = DialN(testCtx(t), tg, o, 6)
	if err != nil || len(clients) != 3 || len(errs) != 3 {
		t.Fatalf("DialN(6) through a proxy refusing half = %d clients, errs %v, err %v", len(clients), errs, err)
	}
	for _, c := range clients {
		checkEcho(t, c)
		c.Close()
	}
	for _, e := range errs {
		if !strings.Contains(e.Error(), "ssh 127.0.0.1: handshake with") {
			t.Errorf("error of a refused connection: %v", e)
		}
	}

	// All refused: an error.
	none := startProxy(t, srv.Addr, func(int) bool { return true })
	tg.Port = none.port()
	writeFile(t, o.KnownHostsFiles[0], fmt.Sprintf("[127.0.0.1]:%d %s\n", none.port(), srv.HostKeyLine))
	clients, errs, err = DialN(testCtx(t), tg, o, 3)
	if err == nil || len(clients) != 0 || len(errs) != 3 {
		t.Errorf("DialN with all refused = %d clients, %v, %v", len(clients), errs, err)
	}

	// A permanent error stops everything at once.
	tg.Port = srv.Port
	o.KnownHostsFiles = []string{filepath.Join(t.TempDir(), "empty")}
	clients, _, err = DialN(testCtx(t), tg, o, 6)
	if !errors.Is(err, ErrHostKeyUnknown) || len(clients) != 0 {
		t.Errorf("DialN to an unknown host = %d clients, %v", len(clients), err)
	}
}

func TestDialNParallelLimit(t *testing.T) {
	// A server that accepts and never speaks: each handshake holds its
	// slot until the connect timeout, so until the first one times out,
	// no more than 8 connections may arrive.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const timeout = 600 * time.Millisecond
	var mu sync.Mutex
	var arrivals []time.Duration
	start := time.Now()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			arrivals = append(arrivals, time.Since(start))
			mu.Unlock()
			go func() {
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	tg := Target{Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port}
	o := Options{ConnectTimeout: timeout, Batch: true, Stderr: &syncBuffer{}}
	clients, errs, err := DialN(testCtx(t), tg, o, 12)
	if err == nil || len(clients) != 0 || len(errs) != 12 {
		t.Fatalf("DialN to a silent server = %d, %d errors, %v", len(clients), len(errs), err)
	}
	mu.Lock()
	defer mu.Unlock()
	early := 0
	for _, a := range arrivals {
		if a < timeout/2 {
			early++
		}
	}
	if early != MaxParallelHandshakes || len(arrivals) != 12 {
		t.Errorf("%d of %d connections arrived before the first could time out, want %d", early, len(arrivals), MaxParallelHandshakes)
	}
}

func TestMaxSessions(t *testing.T) {
	// One connection carries at most MaxSessions sessions (10 by default),
	// which is one more reason for K connections rather than K sessions.
	srv := sshdtest.Start(t, sshdtest.WithMaxSessions(1))
	tg, o := direct(srv)
	c := mustDial(t, tg, o)
	s, err := c.Start(testCtx(t), "cat")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = c.Start(testCtx(t), "cat")
	if err == nil || !strings.Contains(err.Error(), "ssh 127.0.0.1: opening a session") {
		t.Errorf("second session beyond MaxSessions 1: %v", err)
	}
}

func TestDialNMaxStartups(t *testing.T) {
	// sshd drops unauthenticated connections beyond MaxStartups: some of
	// the six fail, the rest are returned.
	srv := sshdtest.Start(t, sshdtest.WithMaxStartups("2"))
	tg, o := direct(srv)
	clients, errs, err := DialN(testCtx(t), tg, o, 6)
	if err != nil || len(clients) == 0 || len(clients)+len(errs) != 6 {
		t.Fatalf("DialN(6) with MaxStartups 2 = %d clients, %v, %v", len(clients), errs, err)
	}
	t.Logf("MaxStartups 2: %d of 6 connected; errors: %v", len(clients), errs)
	for _, c := range clients {
		checkEcho(t, c)
		c.Close()
	}
}

func TestKeepaliveClosesDeadConnection(t *testing.T) {
	srv := sshdtest.Start(t)
	p := startProxy(t, srv.Addr, nil)
	cfg := writeFile(t, filepath.Join(t.TempDir(), "config"), fmt.Sprintf(
		"Host dead\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  ServerAliveInterval 1\n  ServerAliveCountMax 2\n",
		p.port(), srv.User, srv.UserKey))
	kh := writeFile(t, filepath.Join(t.TempDir(), "kh"), fmt.Sprintf("[127.0.0.1]:%d %s\n", p.port(), srv.HostKeyLine))
	stderr := &syncBuffer{}
	c := mustDial(t, Target{Host: "dead"}, Options{ConfigFile: cfg, KnownHostsFiles: []string{kh}, Batch: true, Stderr: stderr})
	s, err := c.Start(testCtx(t), "sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // keepalives answered meanwhile
	p.frozen.Store(true)
	start := time.Now()
	err = s.Wait()
	if err == nil || !strings.Contains(err.Error(), "keepalives") {
		t.Errorf("Wait on a dead link = %v", err)
	}
	if d := time.Since(start); d > 20*time.Second { // 2 keepalives of 1 s, not sleep's 30 s
		t.Errorf("dead link detected after %v", d)
	}
	if !strings.Contains(stderr.String(), "no answer to keepalives") {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestConnectTimeout(t *testing.T) {
	// A server that accepts and never speaks.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, err = Dial(testCtx(t), Target{Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port},
		Options{ConnectTimeout: 300 * time.Millisecond, Batch: true, Stderr: &syncBuffer{}})
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("Dial to a silent server = %v", err)
	}
	if time.Since(start) > 15*time.Second { // 300 ms, not the test's own deadline
		t.Errorf("took %v", time.Since(start))
	}
}
