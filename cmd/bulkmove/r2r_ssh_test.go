package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

// r2rHosts are three hosts made for a test, each a network namespace of
// its own: ctl (the control host), box1 and box2 on one bridge
// (10.199.0.1, .2 and .3), and a second link between ctl and box2 only
// (10.199.1.1 and .3), which box1 has no route to. box1 and box2 run an
// sshd each; box1's HOME is its own, for its ~/.ssh.
type r2rHosts struct {
	ctl, ns1, ns2 string
	box1, box2    *sshdtest.Server
	home1         string
	hold2         string   // a shell snippet box2's bulkmove sources before an agent starts, if the file exists
	config        string   // the control host's ssh_config: box1 and box2
	env           []string // the control host's environment, over this process's
	bin           string
}

var r2rSeq atomic.Int32

func newR2RHosts(t *testing.T, box1 ...sshdtest.Option) *r2rHosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	bin := testbin.Build(t)
	id := fmt.Sprintf("bmr%d%d", os.Getpid()%10000, r2rSeq.Add(1))
	h := &r2rHosts{ctl: id + "c", ns1: id + "a", ns2: id + "b", bin: bin}
	br := id + "br"
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, ns := range []string{br, h.ctl, h.ns1, h.ns2} {
		ip("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		ip("-n", ns, "link", "set", "lo", "up")
	}
	ip("-n", br, "link", "add", "br0", "type", "bridge")
	ip("-n", br, "link", "set", "br0", "up")
	for i, ns := range []string{h.ctl, h.ns1, h.ns2} {
		port := fmt.Sprintf("p%d", i)
		ip("link", "add", port, "netns", br, "type", "veth", "peer", "name", "eth0", "netns", ns)
		ip("-n", br, "link", "set", port, "master", "br0", "up")
		ip("-n", ns, "addr", "add", fmt.Sprintf("10.199.0.%d/24", i+1), "dev", "eth0")
		ip("-n", ns, "link", "set", "eth0", "up")
	}
	ip("link", "add", "side", "netns", h.ctl, "type", "veth", "peer", "name", "side", "netns", h.ns2)
	ip("-n", h.ctl, "addr", "add", "10.199.1.1/24", "dev", "side")
	ip("-n", h.ns2, "addr", "add", "10.199.1.3/24", "dev", "side")
	ip("-n", h.ctl, "link", "set", "side", "up")
	ip("-n", h.ns2, "link", "set", "side", "up")

	path := "PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin"
	h.home1 = shmDir(t)
	h.box1 = sshdtest.Start(t, append([]sshdtest.Option{sshdtest.WithNetns(h.ns1, "10.199.0.2"), sshdtest.WithEnv(path, "HOME="+h.home1)}, box1...)...)
	// box2's bulkmove is a script that runs h.hold2, if a test wrote
	// one, before an agent starts.
	wrap2 := shmDir(t)
	h.hold2 = filepath.Join(wrap2, "hold")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --agent ] && [ -f %s ]; then . %s; fi\nexec %s \"$@\"\n", h.hold2, h.hold2, bin)
	if err := os.WriteFile(filepath.Join(wrap2, "bulkmove"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h.box2 = sshdtest.Start(t, sshdtest.WithNetns(h.ns2, "10.199.0.3"), sshdtest.WithEnv("PATH="+wrap2+":"+filepath.Dir(bin)+":/usr/bin:/bin", "HOME="+shmDir(t)))
	var cfg bytes.Buffer
	for _, s := range []struct {
		alias string
		srv   *sshdtest.Server
	}{{"box1", h.box1}, {"box2", h.box2}} {
		b, err := os.ReadFile(s.srv.WriteSSHConfig(s.alias))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Write(b)
	}
	h.config = filepath.Join(shmDir(t), "ssh_config")
	if err := os.WriteFile(h.config, cfg.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// block makes ns refuse (with a TCP reset) every connection it opens to
// the addrs, as a firewall that lets only the other direction through:
// the replies on connections the addrs open to ns still go. The rules go
// with the namespace.
func (h *r2rHosts) block(t *testing.T, ns string, addrs ...string) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (nftables)")
	}
	var rules strings.Builder
	rules.WriteString("table inet bulkmove_test {\n chain out {\n  type filter hook output priority 0;\n")
	for _, a := range addrs {
		fmt.Fprintf(&rules, "  ip daddr %s tcp flags & (syn|ack) == syn reject with tcp reset\n", a)
	}
	rules.WriteString(" }\n}\n")
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v\n%s", ns, err, out)
	}
}

// box2Cannot makes box2 unable to open a connection to box1: the paths
// after box2 dialling box1 are left.
func (h *r2rHosts) box2Cannot(t *testing.T) {
	t.Helper()
	h.block(t, h.ns2, "10.199.0.2")
}

// ctlBytes is what the control host's interfaces (all but its loopback)
// have sent and received, as the kernel counts them.
func (h *r2rHosts) ctlBytes(t *testing.T) int64 {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", h.ctl, "sh", "-c",
		`for i in /sys/class/net/*; do [ "${i##*/}" = lo ] || cat "$i/statistics/rx_bytes" "$i/statistics/tx_bytes"; done`).Output()
	if err != nil {
		t.Fatalf("the control host's interface counters: %v", err)
	}
	var n int64
	for _, f := range strings.Fields(string(out)) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("an interface counter %q: %v", f, err)
		}
		n += v
	}
	return n
}

// box1Knows writes box1's own ~/.ssh/config for box2, with knownHosts
// as its known_hosts and box2's user key as its identity.
func (h *r2rHosts) box1Knows(t *testing.T, knownHosts string) {
	t.Helper()
	h.box1Config(t, knownHosts, "  IdentityFile "+h.box2.UserKey+"\n")
}

// box1Config writes box1's own ~/.ssh/config for box2, with knownHosts
// as its known_hosts and the lines of keys for its identity.
func (h *r2rHosts) box1Config(t *testing.T, knownHosts, keys string) {
	t.Helper()
	dir := filepath.Join(h.home1, ".ssh")
	os.MkdirAll(dir, 0o700)
	conf := fmt.Sprintf("Host box2\n  HostName %s\n  Port %d\n  User %s\n%s  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n",
		h.box2.Host, h.box2.Port, h.box2.User, keys, knownHosts)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// run runs bulkmove on the control host (bulkmove verify if args start
// with verify) with the ssh_config of both boxes: its stdout, stderr and
// exit code.
func (h *r2rHosts) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	head := []string{"netns", "exec", h.ctl, h.bin}
	if len(args) > 0 && args[0] == "verify" {
		head, args = append(head, "verify"), args[1:]
	}
	cmd := exec.Command("ip", append(append(head, "--ssh-config", h.config), args...)...)
	cmd.Env = append(os.Environ(), h.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("bulkmove %s:\n%s", strings.Join(args, " "), stderr.String())
	return stdout.String(), stderr.String(), exitOf(t, err)
}

// trickyTree makes a tree with every kind of entry a move keeps: gentree's
// mixed tree (modes, mtimes, hard links, symlinks, empty directories),
// odd names, a file of 8 MiB, and a sparse one of 64 MiB.
func trickyTree(t *testing.T, dir string) {
	t.Helper()
	if err := gentree.Mixed(dir, 300, 30); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"with space", "new\nline", "bad\xff\xfeutf8", strings.Repeat("L", 255), "tab\there"} {
		os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
	os.WriteFile(filepath.Join(dir, "big"), big, 0o644)
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("end"), 64<<20)
	f.Close()
}

// TestR2RDirect: bulkmove box1:SRC box2:DEST on a control host moves the
// tricky tree straight from box1 to box2 (-v says so), and leaves DEST
// exactly as a push and a pull of the same tree do; with --json, the
// events are box1's, ending with the exit code.
func TestR2RDirect(t *testing.T) {
	t.Parallel()
	h := newR2RHosts(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	trickyTree(t, src)
	at := func(n string) string { return filepath.Join(dir, n) }

	out, errOut, code := h.run(t, "-v", "-j", "3", "box1:"+src, "box2:"+at("r2r"))
	if code != 0 {
		t.Fatalf("remote to remote: exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "box1 sends straight to box2's data port 10.199.0.3:") {
		t.Errorf("-v does not say the direct path was taken:\n%s", errOut)
	}
	if strings.Contains(errOut, "through this host") {
		t.Errorf("relayed although box1 reaches box2:\n%s", errOut)
	}
	if _, errOut, code := h.run(t, "-j", "3", src, "box2:"+at("push")); code != 0 {
		t.Fatalf("push: exit %d:\n%s", code, errOut)
	}
	if _, errOut, code := h.run(t, "-j", "3", "box1:"+src, at("pull")); code != 0 {
		t.Fatalf("pull: exit %d:\n%s", code, errOut)
	}
	own := treecmp.Options{Owner: true}
	treecmp.Equal(t, src, at("r2r"), own)
	treecmp.Equal(t, at("push"), at("r2r"), own)
	treecmp.Equal(t, at("pull"), at("r2r"), own)

	// A single file, as a new name: box2's agent runs in DEST's parent.
	if _, errOut, code := h.run(t, "box1:"+filepath.Join(src, "big"), "box2:"+at("one")); code != 0 {
		t.Fatalf("a single file: exit %d:\n%s", code, errOut)
	}
	if a, b := fileSum(t, filepath.Join(src, "big")), fileSum(t, at("one")); a != b {
		t.Errorf("a single file: %s holds %s, want %s", at("one"), b, a)
	}

	// Again with --json, into a DEST with a file SRC lacks and --delete:
	// nothing to send, the stray file goes, the events end with 0.
	os.WriteFile(filepath.Join(at("r2r"), "stray"), []byte("x"), 0o644)
	out, errOut, code = h.run(t, "--json", "--delete", "box1:"+src, "box2:"+at("r2r"))
	if code != 0 {
		t.Fatalf("--json --delete: exit %d:\n%s%s", code, out, errOut)
	}
	treecmp.Equal(t, src, at("r2r"), own)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first, last struct {
		Type     string `json:"type"`
		ExitCode *int   `json:"exit_code"`
		Skipped  int64  `json:"skipped"`
	}
	if json.Unmarshal([]byte(lines[0]), &first) != nil || first.Type != "start" {
		t.Errorf("first event %q, want start", lines[0])
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Type != "end" || last.ExitCode == nil || *last.ExitCode != 0 {
		t.Errorf("last event %q, want end with exit_code 0", lines[len(lines)-1])
	}
	for _, l := range lines {
		if strings.Contains(l, "\x00") || !strings.HasPrefix(l, "{") {
			t.Errorf("not an event on stdout: %q", l)
		}
	}
}

// TestR2RReverse: box1 can open no connection to box2 (a firewall in
// box1's namespace refuses them all, SSH too), but box2 can to box1: box2's
// agent dials box1, which listens; -v says so and why, nothing is relayed,
// and the control host's interfaces carry under 1% of the bytes moved, as
// the kernel counts them. DEST is SRC.
func TestR2RReverse(t *testing.T) {
	t.Parallel()
	h := newR2RHosts(t)
	h.block(t, h.ns1, "10.199.0.3", "10.199.1.3")
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	// 64 MiB that no compression shrinks, and a few small files.
	rnd := rand.New(rand.NewPCG(30, 2))
	const size, files = 16 << 20, 4
	for i := range files {
		b := make([]byte, size)
		for j := 0; j < len(b); j += 8 {
			binary.LittleEndian.PutUint64(b[j:], rnd.Uint64())
		}
		os.WriteFile(filepath.Join(src, fmt.Sprintf("r%d", i)), b, 0o644)
	}
	if err := gentree.Mixed(filepath.Join(src, "tree"), 100, 10); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	before := h.ctlBytes(t)
	out, errOut, code := h.run(t, "-v", "-j", "3", "box1:"+src, "box2:"+dst)
	carried := h.ctlBytes(t) - before
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"box1 cannot reach box2's data port 10.199.0.3:", "trying box2 dialling box1",
		"box2 dials box1's port 10.199.0.2:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	for _, not := range []string{"through this host", "over SSH"} {
		if strings.Contains(errOut, not) {
			t.Errorf("stderr says %q, although box2 dials box1:\n%s", not, errOut)
		}
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
	moved := int64(size * files)
	t.Logf("the control host's interfaces carried %d bytes for %d moved", carried, moved)
	if carried*100 >= moved {
		t.Errorf("the control host's interfaces carried %d bytes, %.1f%% of the %d moved (want under 1%%)", carried, float64(carried)*100/float64(moved), moved)
	}
}

// TestR2RWalksWhileAgentStarts: box1's job does not wait for box2's
// agent to start: box2's agent is held until box1's job has opened its
// journal (which it does before it walks), and the move goes through
// without the hold running out.
func TestR2RWalksWhileAgentStarts(t *testing.T) {
	t.Parallel()
	h, dir, src := newR2ROneFile(t)
	jr := filepath.Join(dir, "journal")
	hold := fmt.Sprintf("i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"+
		"[ -e %s ] || echo 'box2: the agent started before box1 opened its journal' >&2\n", jr, jr)
	if err := os.WriteFile(h.hold2, []byte(hold), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	out, errOut, code := h.run(t, "-v", "--journal", jr, "box1:"+src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "the agent started before box1") {
		t.Errorf("box1's job waited for box2's agent:\n%s", errOut)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
}

// TestR2RFallback: box2's data plane where box1 cannot reach it (on the
// link only the control host has), and box2 cannot dial box1: box1 pushes over SSH with its own keys
// when it has them, and else the control host relays, warning; -v says
// why, each time, and DEST is SRC.
func TestR2RFallback(t *testing.T) {
	t.Parallel()
	h := newR2RHosts(t)
	h.box2Cannot(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	trickyTree(t, src)
	own := treecmp.Options{Owner: true}

	h.box1Knows(t, h.box2.KnownHostsFile)
	dst := filepath.Join(dir, "viassh")
	out, errOut, code := h.run(t, "-v", "--data-addr", "10.199.1.3", "box1:"+src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"box1 cannot reach box2's data port 10.199.1.3:", "box1 pushes to box2 over SSH with its own keys"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "through this host") {
		t.Errorf("relayed although box1 logs in to box2:\n%s", errOut)
	}
	treecmp.Equal(t, src, dst, own)

	os.RemoveAll(filepath.Join(h.home1, ".ssh")) // box1 cannot log in to box2
	dst = filepath.Join(dir, "relayed")
	out, errOut, code = h.run(t, "-v", "--data-addr", "10.199.1.3", "box1:"+src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"box1 cannot reach box2's data port", "warning: remote to remote: every byte goes through this host", "nor box2 over SSH"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	treecmp.Equal(t, src, dst, own)
}

// TestR2RForwardAgent: box1 knows box2's host key but holds no key box2
// takes, box2 cannot dial box1, box2's data port is out of its reach and its sshd forwards no
// port (no relay): the move is refused, saying --forward-agent would lend
// box1 this host's agent; with --forward-agent, this host's agent (which
// holds box2's key) logs box1 in to box2 and the move goes over SSH.
func TestR2RForwardAgent(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh-agent"); err != nil {
		t.Skip("needs ssh-agent")
	}
	h := newR2RHosts(t, sshdtest.WithConfig("AllowTcpForwarding no"))
	h.box2Cannot(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	trickyTree(t, src)
	h.box1Config(t, h.box2.KnownHostsFile, "  IdentitiesOnly no\n")
	sock := filepath.Join(dir, "agent.sock")
	// ssh-agent returns once its socket listens, saying its pid.
	started, err := exec.Command("ssh-agent", "-s", "-a", sock).Output()
	if err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	m := regexp.MustCompile(`SSH_AGENT_PID=(\d+)`).FindSubmatch(started)
	if m == nil {
		t.Fatalf("ssh-agent said no pid: %s", started)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGTERM) })
	if added, err := exec.Command("env", "SSH_AUTH_SOCK="+sock, "ssh-add", h.box2.UserKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, added)
	}
	h.env = []string{"SSH_AUTH_SOCK=" + sock}

	dst := filepath.Join(dir, "refused")
	h.refused(t, src, dst, "box1 has no key box2 accepts: --forward-agent lends it this host's SSH agent")
	if _, err := os.Stat(filepath.Join(dst, "big")); err == nil {
		t.Errorf("a file landed at %s although the move was refused", dst)
	}

	dst = filepath.Join(dir, "forwarded")
	out, errOut, code := h.run(t, "-v", "--forward-agent", "--data-addr", "10.199.1.3", "box1:"+src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("--forward-agent: exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "box1 pushes to box2 over SSH") {
		t.Errorf("-v does not say box1 pushed over SSH:\n%s", errOut)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
}

// TestR2RHostKeyChanged: box1's known_hosts holds another key for box2 (which cannot dial box1):
// the SSH path fails with OpenSSH's warning, and no relay is tried behind
// its back; nothing lands at DEST.
func TestR2RHostKeyChanged(t *testing.T) {
	h, dir, src := newR2ROneFile(t)
	h.box2Cannot(t)
	other := sshdtest.Start(t) // only for a key that is not box2's
	kh := filepath.Join(h.home1, "known_hosts")
	os.WriteFile(kh, []byte(h.box2.KnownHostsName()+" "+other.HostKeyLine+"\n"), 0o600)
	h.box1Knows(t, kh)
	dst := filepath.Join(dir, "dst")
	errOut := h.refused(t, src, dst, "REMOTE HOST IDENTIFICATION HAS CHANGED")
	if strings.Contains(errOut, "through this host") {
		t.Errorf("relayed after a changed host key:\n%s", errOut)
	}
	if _, err := os.Stat(filepath.Join(dst, "f")); err == nil {
		t.Errorf("the file landed at DEST")
	}
}

// refused runs a move from box1's src to box2's dst, box2's data port
// out of box1's reach, that must end with exit 3 and want on stderr,
// which it returns.
func (h *r2rHosts) refused(t *testing.T, src, dst, want string) string {
	t.Helper()
	out, errOut, code := h.run(t, "-v", "--data-addr", "10.199.1.3", "box1:"+src, "box2:"+dst)
	if code != 3 {
		t.Errorf("exit %d, want 3:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	return errOut
}

// newR2ROneFile is newR2RHosts with a scratch directory and in it SRC,
// a directory holding one file, f.
func newR2ROneFile(t *testing.T) (h *r2rHosts, dir, src string) {
	h = newR2RHosts(t)
	dir = shmDir(t)
	src = filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	return h, dir, src
}

// fileSum is the SHA-256 of a file's content, in hex.
func fileSum(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestR2RVerify: bulkmove verify box1:SRC box2:DEST compares the two
// trees from the control host as verify does from box1: the same (exit
// 0), a file whose content differs at DEST (its size and mtime kept) and
// one DEST has over (exit 2, each named on stdout), the content left out
// with --no-content.
func TestR2RVerify(t *testing.T) {
	t.Parallel()
	h, dir, src := newR2ROneFile(t)
	os.WriteFile(filepath.Join(src, "g"), []byte("more data"), 0o644)
	dst := filepath.Join(dir, "dst")
	if _, errOut, code := h.run(t, "box1:"+src, "box2:"+dst); code != 0 {
		t.Fatalf("move: exit %d:\n%s", code, errOut)
	}
	out, errOut, code := h.run(t, "verify", "box1:"+src, "box2:"+dst)
	if code != 0 || out != "" {
		t.Fatalf("verify of equal trees: exit %d, stdout %q:\n%s", code, out, errOut)
	}

	g := filepath.Join(dst, "g")
	fi, err := os.Stat(g)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(g, []byte("MORE DATA"), 0o644)
	os.Chtimes(g, fi.ModTime(), fi.ModTime())
	os.WriteFile(filepath.Join(dst, "stray"), []byte("x"), 0o644)
	out, errOut, code = h.run(t, "verify", "box1:"+src, "box2:"+dst)
	if code != 2 {
		t.Errorf("verify: exit %d, want 2:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"differ g: content", "extra stray"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify's stdout lacks %q:\n%s", want, out)
		}
	}
	out, _, code = h.run(t, "verify", "--no-content", "box1:"+src, "box2:"+dst)
	if code != 2 || strings.Contains(out, "differ g") || !strings.Contains(out, "extra stray") {
		t.Errorf("verify --no-content: exit %d, want 2 for the stray file only:\n%s", code, out)
	}
}

// TestR2RResume: box1's sender killed mid-move, once its journal holds
// files (the control host says the move failed); the same command run
// again on the control host resumes from the journal and ends with DEST
// equal to SRC.
func TestR2RResume(t *testing.T) {
	t.Parallel()
	h := newR2RHosts(t)
	dir := shmDir(t)
	src := filepath.Join(dir, "src")
	if err := gentree.Mixed(src, 400, 20); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("big%02d", i)), bytes.Repeat([]byte{byte(i)}, 256<<10), 0o644)
	}
	dst := filepath.Join(dir, "dst")
	cmd := exec.Command("ip", "netns", "exec", h.ctl, h.bin, "--ssh-config", h.config, "--bwlimit", "2M", "-j", "2",
		"box1:"+src, "box2:"+dst)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once some files have landed, box1's sender goes (SIGKILL: no
	// graceful end).
	landed := func() int {
		n := 0
		filepath.WalkDir(dst, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	// box1's journal (in its HOME's state directory) has grown past
	// what it holds when opened: batches were acknowledged.
	journaled := func() bool {
		js, _ := filepath.Glob(filepath.Join(h.home1, ".local/state/bulkmove/journal/*.journal"))
		for _, j := range js {
			if fi, err := os.Stat(j); err == nil && fi.Size() > 1024 {
				return true
			}
		}
		return false
	}
	for landed() < 20 || !journaled() {
		select {
		case err := <-waited:
			t.Fatalf("the move ended (%v) before its journal held files:\n%s", err, stderr.String())
		case <-tick.C:
		}
	}
	killed := false
	pids, _ := exec.Command("ip", "netns", "pids", h.ns1).Output()
	for _, pid := range strings.Fields(string(pids)) {
		if b, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil && bytes.Contains(b, []byte("--r2r-send")) {
			if p, err := strconv.Atoi(pid); err == nil && syscall.Kill(p, syscall.SIGKILL) == nil {
				killed = true
			}
		}
	}
	if !killed {
		t.Fatalf("no sender to kill on box1 (the move ended first?):\n%s", stderr.String())
	}
	if err := <-waited; exitOf(t, err) == 0 {
		t.Fatalf("the move whose sender was killed exited 0:\n%s", stderr.String())
	}
	t.Logf("the interrupted move:\n%s", stderr.String())
	if n := landed(); n >= 400+40 {
		t.Fatalf("all %d files landed before the sender was killed", n)
	}
	out, errOut, code := h.run(t, "-v", "box1:"+src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("rerun: exit %d:\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "resuming: the journal") {
		t.Errorf("the rerun did not resume from the journal:\n%s", errOut)
	}
	treecmp.Equal(t, src, dst, treecmp.Options{Owner: true})
}

// TestR2RLogFile: the control host's --log-file has box1's line for each
// entry created or deleted, as a push's log has them, and the pass's
// footer counts them; the data moved is in the footer's bytes.
func TestR2RLogFile(t *testing.T) {
	t.Parallel()
	h, dir, src := newR2ROneFile(t)
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("more data"), 0o644)
	os.Symlink("f", filepath.Join(src, "link"))
	dst := filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	os.WriteFile(filepath.Join(dst, "stray"), []byte("x"), 0o644)
	log := filepath.Join(dir, "cutover.log")
	out, errOut, code := h.run(t, "--log-file", log, "--log-file-format", "%i %n%L (%l)", "--delete", "box1:"+src, "box2:"+dst)
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	t.Logf("the control host's log:\n%s", got)
	for _, want := range []string{"<f+++++++++ f (4)\n", "cd+++++++++ sub/ (", "<f+++++++++ sub/b (9)\n", "cL+++++++++ link -> f (", "*deleting   stray (",
		"totals: 4 created, ", "1 deleted, 0 backed up, 0 failed; 13 bytes of file data sent", "exit 0 (done)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	if strings.Contains(got, "\x00") {
		t.Errorf("the log holds a NUL (a line meant for the control host only)")
	}
}

// TestR2RMetricsTextfile: the control host's --metrics-textfile has the
// move's figures, which box1's job measured, as a push's has: the bytes
// and files done, and each stream's bytes, which add up to them.
func TestR2RMetricsTextfile(t *testing.T) {
	t.Parallel()
	h, dir, src := newR2ROneFile(t)
	os.WriteFile(filepath.Join(src, "g"), bytes.Repeat([]byte("g"), 3<<20), 0o644)
	const moved = 4 + 3<<20
	prom := filepath.Join(dir, "bulkmove.prom")
	out, errOut, code := h.run(t, "-j", "2", "--metrics-textfile", prom, "box1:"+src, "box2:"+filepath.Join(dir, "dst"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(prom)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the control host's textfile:\n%s", b)
	value := func(series string) (sum int64, n int) {
		for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(series)+`(?:\{[^}]*\})? (\S+)$`).FindAllSubmatch(b, -1) {
			v, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				t.Fatalf("%s: %q", series, m[1])
			}
			sum += int64(v)
			n++
		}
		return sum, n
	}
	for _, c := range []struct {
		series string
		want   int64
	}{{"bulkmove_job_done_bytes_total", moved}, {"bulkmove_job_done_files_total", 2}, {"bulkmove_stream_sent_bytes_total", moved}, {"bulkmove_job_last_exit_code", 0}} {
		if got, n := value(c.series); n == 0 || got != c.want {
			t.Errorf("%s: %d (in %d series), want %d", c.series, got, n, c.want)
		}
	}
	if _, n := value("bulkmove_stream_sent_bytes_total"); n != 2 {
		t.Errorf("bulkmove_stream_sent_bytes_total: %d streams, want 2", n)
	}
}
