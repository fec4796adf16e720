package agentbin_test

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/bulkmove/bulkmove/internal/shell"
	"github.com/bulkmove/bulkmove/internal/sshdtest"
	"github.com/bulkmove/bulkmove/transport/sshx"
	"github.com/bulkmove/bulkmove/transport/sshx/agentbin"
)

// TestMain makes the tests hermetic on this side: an empty HOME (no
// ~/.ssh), no ssh-agent; each dial reads no ssh_config (see dial).
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "agentbin-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("SSH_AUTH_SOCK")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// syncBuffer is a Stderr that tests can read while connections write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// dial connects to srv with its key and known_hosts line, in batch mode
// and with no ssh_config, and returns the connection and its Stderr.
func dial(t *testing.T, srv *sshdtest.Server) (*sshx.Client, *syncBuffer) {
	t.Helper()
	stderr := &syncBuffer{}
	c, err := sshx.Dial(testCtx(t), sshx.Target{Host: "127.0.0.1", Port: srv.Port, User: srv.User}, sshx.Options{
		Identities:      []string{srv.UserKey},
		KnownHostsFiles: []string{srv.KnownHostsFile},
		ConfigFile:      "none",
		Batch:           true,
		Stderr:          stderr,
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, stderr
}

// writeFile writes content to path, making its directory, and returns path.
func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeBulkmove is a stand-in for a bulkmove binary: it answers `version
// --proto` with proto, `version` as release version does (unless version is
// ""), and echoes anything else.
func fakeBulkmove(version string, proto int) string {
	s := fmt.Sprintf("#!/bin/sh\nif [ \"$1 $2\" = \"version --proto\" ]; then echo %d; exit 0; fi\n", proto)
	if version != "" {
		s += fmt.Sprintf("if [ \"$1\" = version ]; then echo 'bulkmove %s (protocol %d, go1, linux/amd64)'; exit 0; fi\n", version, proto)
	}
	return s + "echo \"fake bulkmove $*\"\n"
}

// hostile is what an attacker puts where bulkmove may run it: it leaves
// marker behind and answers like a bulkmove of protocol 7.
func hostile(marker string) string {
	return "#!/bin/sh\ntouch " + marker + "\necho 7\n"
}

// cacheRig is a test sshd whose HOME and PATH the test chooses, a
// connection to it, and a local fake bulkmove of version v1, protocol 7.
type cacheRig struct {
	home, bin, local, sum string
	c                     *sshx.Client
	stderr                *syncBuffer
}

func newCacheRig(t *testing.T, home string) *cacheRig {
	r := &cacheRig{home: home, bin: t.TempDir()}
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+r.bin+":/usr/bin:/bin", "HOME="+home))
	r.c, r.stderr = dial(t, srv)
	r.local = writeFile(t, filepath.Join(t.TempDir(), "bulkmove"), fakeBulkmove("v1", 7))
	os.Chmod(r.local, 0o755)
	var err error
	if r.sum, err = agentbin.Sum(r.local); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *cacheRig) cached() string { return filepath.Join(r.home, agentbin.CacheDir, "v1", "bulkmove") }

// start runs AgentCommand's fast path as a push does.
func (r *cacheRig) start(t *testing.T) string {
	t.Helper()
	out, _ := r.c.Output(testCtx(t), agentbin.Command("v1", 7, r.sum, "agent /x"))
	return strings.TrimSpace(string(out))
}

func (r *cacheRig) ensure(t *testing.T) (string, error) {
	return r.c.EnsureAgent(testCtx(t), "", "v1", 7, r.local)
}

func (r *cacheRig) mustEnsure(t *testing.T) {
	t.Helper()
	p, err := r.ensure(t)
	if err != nil || p != r.cached() {
		t.Fatalf("EnsureAgent = %q, %v; want %s", p, err, r.cached())
	}
	if b, _ := os.ReadFile(p); string(b) != fakeBulkmove("v1", 7) {
		t.Fatalf("the cached binary is not the local one: %q", b)
	}
}

func noMarker(t *testing.T, marker string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the planted program ran: %s exists", marker)
	}
}

// TestAgentCacheSwappedBinaryNotRun: the cached binary is replaced by
// another program, its record left in place. The fast path of a push must
// not run it; EnsureAgent finds it out by its hash and installs the right
// one again.
func TestAgentCacheSwappedBinaryNotRun(t *testing.T) {
	r := newCacheRig(t, t.TempDir())
	r.mustEnsure(t)
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Fatalf("fast path after the upload = %q", out)
	}
	marker := filepath.Join(t.TempDir(), "RAN")

	// A new file in its place.
	os.Remove(r.cached())
	writeFile(t, r.cached(), hostile(marker))
	os.Chmod(r.cached(), 0o755)
	if out := r.start(t); out != agentbin.NoAgent {
		t.Errorf("fast path with the binary swapped = %q, want %s", out, agentbin.NoAgent)
	}
	noMarker(t, marker)
	r.mustEnsure(t)
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Fatalf("fast path after the reinstall = %q", out)
	}

	// The same file rewritten in place, same size, its mtime put back:
	// its ctime tells.
	time.Sleep(1100 * time.Millisecond)
	fi, _ := os.Stat(r.cached())
	evil := hostile(marker)
	evil += strings.Repeat("#", int(fi.Size())-len(evil)-1) + "\n"
	if err := os.WriteFile(r.cached(), []byte(evil), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(r.cached(), fi.ModTime(), fi.ModTime())
	if out := r.start(t); out != agentbin.NoAgent {
		t.Errorf("fast path with the binary rewritten in place = %q, want %s", out, agentbin.NoAgent)
	}
	noMarker(t, marker)
	r.mustEnsure(t)
}

// TestAgentPathOtherVersionNotUsed: a bulkmove on the remote PATH that
// speaks the same protocol but is another version is not run, neither by
// the fast path nor by EnsureAgent; one of this very version is.
func TestAgentPathOtherVersionNotUsed(t *testing.T) {
	r := newCacheRig(t, t.TempDir())
	marker := filepath.Join(t.TempDir(), "RAN")
	onPath := filepath.Join(r.bin, "bulkmove")
	writeFile(t, onPath, "#!/bin/sh\n"+
		"if [ \"$1 $2\" = \"version --proto\" ]; then echo 7; exit 0; fi\n"+
		"if [ \"$1\" = version ]; then echo 'bulkmove v0-other (protocol 7, go1, linux/amd64)'; exit 0; fi\n"+
		"touch "+marker+"\necho \"path bulkmove $*\"\n")
	os.Chmod(onPath, 0o755)
	if out := r.start(t); out != agentbin.NoAgent {
		t.Errorf("fast path with another version on PATH = %q, want %s", out, agentbin.NoAgent)
	}
	noMarker(t, marker)
	r.mustEnsure(t)
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Errorf("fast path = %q, want the cached binary", out)
	}
	noMarker(t, marker)

	// The same version and protocol (a packaged install of this release): used.
	writeFile(t, onPath, fakeBulkmove("v1", 7))
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Errorf("fast path with this version on PATH = %q", out)
	}
	if p, err := r.ensure(t); err != nil || p != onPath {
		t.Errorf("EnsureAgent with this version on PATH = %q, %v", p, err)
	}
}

// attacker returns a second local user (created if need be), the one who
// plants programs in the victim's cache. Root only.
func attacker(t *testing.T) (uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacker is a second local user, created with useradd")
	}
	const name = "bmattksshx"
	if _, err := user.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			if _, lerr := user.Lookup(name); lerr != nil {
				t.Fatalf("useradd %s: %v: %s", name, err, out)
			}
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// asAttacker runs script with sh as the attacker.
func asAttacker(t *testing.T, uid, gid int, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("attacker's script: %v: %s", err, out)
	}
}

// plant is the attacker's script: a hostile program as DIR/bulkmove, with
// the records the cache keeps next to it saying it is the binary of sum.
func plant(dir, sum, marker string) string {
	return "set -e; mkdir -p " + shell.Quote(dir) + "; cd " + shell.Quote(dir) + "; rm -f bulkmove bulkmove.sha256 bulkmove" + agentbin.RecordSuffix + "; " +
		"printf '%s' " + shell.Quote(hostile(marker)) + " > bulkmove; chmod 755 bulkmove; " +
		"printf '%s\\n' " + sum + " > bulkmove.sha256; " +
		"printf '%s|%s\\n' " + sum + " \"$(stat -c '%u|%a|%F|%d|%i|%s|%Y|%Z' bulkmove)\" > bulkmove" + agentbin.RecordSuffix
}

// traversable lets the attacker reach into dirs (search permission only,
// which sshd's StrictModes allows too).
func traversable(t *testing.T, dirs ...string) {
	for _, d := range dirs {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAgentCacheUnsafeDirs: the cache is only as safe as its directories.
// A second local user who can write to one of them plants a program there
// with the records that vouch for it; the push must not run it.
func TestAgentCacheUnsafeDirs(t *testing.T) {
	uid, gid := attacker(t)

	t.Run("group-writable", func(t *testing.T) {
		home := t.TempDir()
		r := newCacheRig(t, home)
		r.mustEnsure(t)
		ver := filepath.Dir(r.cached())
		traversable(t, filepath.Dir(home), home, filepath.Join(home, ".cache"), filepath.Join(home, agentbin.CacheDir))
		// The victim's mistake: the attacker's group may write to it.
		os.Chown(ver, 0, gid)
		os.Chmod(ver, 0o770)
		marker := filepath.Join(t.TempDir(), "RAN")
		asAttacker(t, uid, gid, plant(ver, r.sum, marker))
		if out := r.start(t); out != agentbin.NoAgent {
			t.Errorf("fast path with a group-writable cache = %q, want %s", out, agentbin.NoAgent)
		}
		noMarker(t, marker)
		// Repaired, with a warning, and the binary checked afresh.
		r.mustEnsure(t)
		if fi, _ := os.Stat(ver); fi.Mode().Perm() != 0o700 {
			t.Errorf("%s is %v after EnsureAgent, want 0700", ver, fi.Mode().Perm())
		}
		if fi, _ := os.Stat(r.cached()); fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("the attacker's file is still the cached binary")
		}
		if w := r.stderr.String(); !strings.Contains(w, ver+" was writable by group or others (mode 770): made it 0700") {
			t.Errorf("no warning about the repair: %q", w)
		}
		if out := r.start(t); out != "fake bulkmove agent /x" {
			t.Errorf("fast path after the repair = %q", out)
		}
		noMarker(t, marker)
	})

	t.Run("owned by another user", func(t *testing.T) {
		home := t.TempDir()
		r := newCacheRig(t, home)
		traversable(t, filepath.Dir(home), home)
		os.MkdirAll(filepath.Join(home, ".cache"), 0o711)
		// The attacker got there first.
		bm := filepath.Join(home, agentbin.CacheDir)
		os.Mkdir(bm, 0o755)
		os.Chown(bm, uid, gid)
		marker := filepath.Join(t.TempDir(), "RAN")
		asAttacker(t, uid, gid, plant(filepath.Join(bm, "v1"), r.sum, marker))
		if out := r.start(t); out != agentbin.NoAgent {
			t.Errorf("fast path with a cache owned by another user = %q, want %s", out, agentbin.NoAgent)
		}
		noMarker(t, marker)
		_, err := r.ensure(t)
		want := fmt.Sprintf("%s is owned by uid %d, not by you (uid 0) or root: refusing", bm, uid)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("EnsureAgent = %v, want an error containing %q", err, want)
		}
		noMarker(t, marker)
	})

	t.Run("symlink", func(t *testing.T) {
		home := t.TempDir()
		r := newCacheRig(t, home)
		theirs := t.TempDir()
		traversable(t, filepath.Dir(theirs))
		os.Chown(theirs, uid, gid)
		marker := filepath.Join(t.TempDir(), "RAN")
		asAttacker(t, uid, gid, plant(filepath.Join(theirs, "bulkmove", "v1"), r.sum, marker))
		// ~/.cache points into a directory the attacker owns.
		if err := os.Symlink(theirs, filepath.Join(home, ".cache")); err != nil {
			t.Fatal(err)
		}
		if out := r.start(t); out != agentbin.NoAgent {
			t.Errorf("fast path through a symlinked ~/.cache = %q, want %s", out, agentbin.NoAgent)
		}
		noMarker(t, marker)
		_, err := r.ensure(t)
		want := filepath.Join(home, ".cache") + " is a symbolic link: refusing"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("EnsureAgent = %v, want an error containing %q", err, want)
		}
		noMarker(t, marker)
	})
}

// TestAgentCacheMadePrivate: the directories EnsureAgent creates are 0700
// whatever the remote umask, and a home writable by others is refused.
func TestAgentCacheMadePrivate(t *testing.T) {
	home := t.TempDir()
	r := newCacheRig(t, home)
	r.mustEnsure(t)
	for _, d := range []string{".cache", agentbin.CacheDir, agentbin.CacheDir + "/v1"} {
		if fi, err := os.Stat(filepath.Join(home, d)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("~/%s: %v %v, want 0700", d, fi.Mode().Perm(), err)
		}
	}
	// The record lost: the binary is hashed and recorded again, not
	// uploaded again.
	fi, _ := os.Stat(r.cached())
	os.Remove(r.cached() + agentbin.RecordSuffix)
	if out := r.start(t); out != agentbin.NoAgent {
		t.Errorf("fast path without a record = %q, want %s", out, agentbin.NoAgent)
	}
	r.mustEnsure(t)
	if fi2, _ := os.Stat(r.cached()); !os.SameFile(fi, fi2) {
		t.Error("uploaded again although the cached binary was the right one")
	}
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Errorf("fast path after recording again = %q", out)
	}

	os.Chmod(home, 0o777)
	if out := r.start(t); out != agentbin.NoAgent {
		t.Errorf("fast path with a world-writable home = %q, want %s", out, agentbin.NoAgent)
	}
	if _, err := r.ensure(t); err == nil || !strings.Contains(err.Error(), home+" is writable by group or others (mode 777)") {
		t.Errorf("EnsureAgent with a world-writable home = %v", err)
	}
	os.Chmod(home, 0o700)
}

// TestEnsureAgentConcurrent: pushes that find the cache missing at the same
// time all make it and install, none fails on what another made.
func TestEnsureAgentConcurrent(t *testing.T) {
	r := newCacheRig(t, t.TempDir())
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := r.ensure(t)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	r.mustEnsure(t)
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Errorf("fast path after concurrent installs = %q", out)
	}
}

func TestEnsureAgent(t *testing.T) {
	if p, err := exec.LookPath("bulkmove"); err == nil && (strings.HasPrefix(p, "/usr/bin") || strings.HasPrefix(p, "/bin")) {
		t.Skipf("bulkmove is installed at %s, which the remote PATH of this test includes", p)
	}
	bin := t.TempDir()
	home := t.TempDir()
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+bin+":/usr/bin:/bin", "HOME="+home))
	c, stderr := dial(t, srv)
	ctx := testCtx(t)

	local := filepath.Join(t.TempDir(), "bulkmove")
	fake := func(proto int) string { return fakeBulkmove("", proto) }
	writeFile(t, local, fake(7))
	os.Chmod(local, 0o755)

	// Nothing on the remote: uploaded to the cache.
	p, err := c.EnsureAgent(ctx, "", "v1.2.3-test", 7, local)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(home, ".cache/bulkmove/v1.2.3-test/bulkmove")
	if p != want {
		t.Fatalf("EnsureAgent = %q, want %q", p, want)
	}
	fi, err := os.Stat(want)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("uploaded file: %v %v", fi, err)
	}
	if got, _ := os.ReadFile(want); string(got) != fake(7) {
		t.Errorf("uploaded content = %q", got)
	}
	if !strings.Contains(stderr.String(), "uploading bulkmove") {
		t.Errorf("no upload notice: %q", stderr.String())
	}
	if out, err := c.Output(ctx, shell.Quote(p)+" agent /x"); err != nil || string(out) != "fake bulkmove agent /x\n" {
		t.Errorf("running the uploaded binary: %q %v", out, err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	leftovers, _ := filepath.Glob(filepath.Join(home, ".cache/bulkmove/v1.2.3-test/.bulkmove.tmp.*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %q", leftovers)
	}

	// Second run: reused, not uploaded again.
	p, err = c.EnsureAgent(ctx, "", "v1.2.3-test", 7, local)
	if err != nil || p != want {
		t.Fatalf("second EnsureAgent = %q, %v", p, err)
	}
	if fi, _ := os.Stat(want); fi.Sys().(*syscall.Stat_t).Ino != ino {
		t.Error("the cached binary was uploaded again")
	}

	// A different local binary with the same version string: replaced.
	writeFile(t, local, fake(7)+"# rebuilt\n")
	if p, err = c.EnsureAgent(ctx, "", "v1.2.3-test", 7, local); err != nil || p != want {
		t.Fatalf("EnsureAgent after rebuild = %q, %v", p, err)
	}
	if got, _ := os.ReadFile(want); !strings.HasSuffix(string(got), "# rebuilt\n") {
		t.Error("the changed binary was not uploaded")
	}

	// A local binary that does not answer the protocol: refused, no file left.
	writeFile(t, local, fake(6))
	if _, err := c.EnsureAgent(ctx, "", "v-bad", 7, local); err == nil {
		t.Error("upload of a binary speaking protocol 6 accepted")
	}
	if _, err := os.Stat(filepath.Join(home, ".cache/bulkmove/v-bad/bulkmove")); err == nil {
		t.Error("a binary that failed the check was installed")
	}

	// bulkmove on the remote PATH of the same version and protocol: used.
	writeFile(t, filepath.Join(bin, "bulkmove"), fakeBulkmove("v2", 7))
	os.Chmod(filepath.Join(bin, "bulkmove"), 0o755)
	if p, err := c.EnsureAgent(ctx, "", "v2", 7, local); err != nil || p != filepath.Join(bin, "bulkmove") {
		t.Errorf("EnsureAgent with bulkmove on PATH = %q, %v", p, err)
	}
	// With another protocol: the cache is used instead (same OS/arch).
	writeFile(t, local, fakeBulkmove("v3", 8))
	if p, err := c.EnsureAgent(ctx, "", "v3", 8, local); err != nil || p != filepath.Join(home, ".cache/bulkmove/v3/bulkmove") {
		t.Errorf("EnsureAgent with an old bulkmove on PATH = %q, %v", p, err)
	}

	// --remote-bulkmove: checked.
	if p, err := c.EnsureAgent(ctx, filepath.Join(bin, "bulkmove"), "v", 7, local); err != nil || p != filepath.Join(bin, "bulkmove") {
		t.Errorf("--remote-bulkmove = %q, %v", p, err)
	}
	if _, err := c.EnsureAgent(ctx, filepath.Join(bin, "bulkmove"), "v", 9, local); !errors.Is(err, agentbin.ErrProtocol) ||
		!strings.Contains(err.Error(), `speaks protocol "7", this bulkmove speaks 9`) {
		t.Errorf("--remote-bulkmove of another protocol: %v", err)
	}
	if _, err := c.EnsureAgent(ctx, "/no/such/bulkmove", "v", 7, local); !errors.Is(err, agentbin.ErrUnsupportedRemote) ||
		!strings.Contains(err.Error(), "/no/such/bulkmove does not run there") {
		t.Errorf("--remote-bulkmove missing: %v", err)
	}
	writeFile(t, filepath.Join(home, "bm"), fake(7))
	os.Chmod(filepath.Join(home, "bm"), 0o755)
	if p, err := c.EnsureAgent(ctx, "~/bm", "v", 7, local); err != nil || p != filepath.Join(home, "bm") {
		t.Errorf("--remote-bulkmove ~/bm = %q, %v", p, err)
	}

	// Another OS/arch (a fake uname) and nothing usable: a clear error.
	os.Remove(filepath.Join(bin, "bulkmove"))
	writeFile(t, filepath.Join(bin, "uname"), "#!/bin/sh\necho 'Linux s390x'\n")
	os.Chmod(filepath.Join(bin, "uname"), 0o755)
	_, err = c.EnsureAgent(ctx, "", "v4", 8, local)
	if !errors.Is(err, agentbin.ErrUnsupportedRemote) {
		t.Fatalf("EnsureAgent on another arch = %v", err)
	}
	for _, want := range []string{"linux/s390x", `"Linux s390x"`, "--remote-bulkmove"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
}

func TestEnsureAgentWithoutSFTP(t *testing.T) {
	home := t.TempDir()
	srv := sshdtest.Start(t, sshdtest.WithoutSFTP(), sshdtest.WithEnv("PATH=/usr/bin:/bin", "HOME="+home))
	c, _ := dial(t, srv)
	local := writeFile(t, filepath.Join(t.TempDir(), "bulkmove"), "#!/bin/sh\necho 3\n")
	p, err := c.EnsureAgent(testCtx(t), "", "nosftp", 3, local)
	if err != nil || p != filepath.Join(home, ".cache/bulkmove/nosftp/bulkmove") {
		t.Fatalf("EnsureAgent without sftp = %q, %v", p, err)
	}
	if got, _ := os.ReadFile(p); string(got) != "#!/bin/sh\necho 3\n" {
		t.Errorf("content = %q", got)
	}
}
