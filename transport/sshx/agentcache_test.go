package sshx

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/sshdtest"
)

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

func agentCmd(version string, proto int, sum, args string) string {
	return AgentCommand(version, proto, sum, args)
}

// cacheRig is a test sshd whose HOME and PATH the test chooses, a
// connection to it, and a local fake bulkmove of version v1, protocol 7.
type cacheRig struct {
	home, bin, local, sum string
	c                     *Client
	stderr                *syncBuffer
}

func newCacheRig(t *testing.T, home string) *cacheRig {
	r := &cacheRig{home: home, bin: t.TempDir()}
	srv := sshdtest.Start(t, sshdtest.WithEnv("PATH="+r.bin+":/usr/bin:/bin", "HOME="+home))
	tg, o := direct(srv)
	r.stderr = o.Stderr.(*syncBuffer)
	r.c = mustDial(t, tg, o)
	r.local = writeFile(t, filepath.Join(t.TempDir(), "bulkmove"), fakeBulkmove("v1", 7))
	os.Chmod(r.local, 0o755)
	var err error
	if r.sum, err = BinarySum(r.local); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *cacheRig) cached() string { return filepath.Join(r.home, CacheDir, "v1", "bulkmove") }

// start runs AgentCommand's fast path as a push does.
func (r *cacheRig) start(t *testing.T) string {
	t.Helper()
	out, _ := r.c.Output(testCtx(t), agentCmd("v1", 7, r.sum, "agent /x"))
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
	if out := r.start(t); out != NoAgent {
		t.Errorf("fast path with the binary swapped = %q, want %s", out, NoAgent)
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
	if out := r.start(t); out != NoAgent {
		t.Errorf("fast path with the binary rewritten in place = %q, want %s", out, NoAgent)
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
	if out := r.start(t); out != NoAgent {
		t.Errorf("fast path with another version on PATH = %q, want %s", out, NoAgent)
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
	return "set -e; mkdir -p " + ShellQuote(dir) + "; cd " + ShellQuote(dir) + "; rm -f bulkmove bulkmove.sha256 bulkmove" + RecordSuffix + "; " +
		"printf '%s' " + ShellQuote(hostile(marker)) + " > bulkmove; chmod 755 bulkmove; " +
		"printf '%s\\n' " + sum + " > bulkmove.sha256; " +
		"printf '%s|%s\\n' " + sum + " \"$(stat -c '%u|%a|%F|%d|%i|%s|%Y|%Z' bulkmove)\" > bulkmove" + RecordSuffix
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
		traversable(t, filepath.Dir(home), home, filepath.Join(home, ".cache"), filepath.Join(home, CacheDir))
		// The victim's mistake: the attacker's group may write to it.
		os.Chown(ver, 0, gid)
		os.Chmod(ver, 0o770)
		marker := filepath.Join(t.TempDir(), "RAN")
		asAttacker(t, uid, gid, plant(ver, r.sum, marker))
		if out := r.start(t); out != NoAgent {
			t.Errorf("fast path with a group-writable cache = %q, want %s", out, NoAgent)
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
		bm := filepath.Join(home, CacheDir)
		os.Mkdir(bm, 0o755)
		os.Chown(bm, uid, gid)
		marker := filepath.Join(t.TempDir(), "RAN")
		asAttacker(t, uid, gid, plant(filepath.Join(bm, "v1"), r.sum, marker))
		if out := r.start(t); out != NoAgent {
			t.Errorf("fast path with a cache owned by another user = %q, want %s", out, NoAgent)
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
		if out := r.start(t); out != NoAgent {
			t.Errorf("fast path through a symlinked ~/.cache = %q, want %s", out, NoAgent)
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
	for _, d := range []string{".cache", CacheDir, CacheDir + "/v1"} {
		if fi, err := os.Stat(filepath.Join(home, d)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("~/%s: %v %v, want 0700", d, fi.Mode().Perm(), err)
		}
	}
	// The record lost: the binary is hashed and recorded again, not
	// uploaded again.
	fi, _ := os.Stat(r.cached())
	os.Remove(r.cached() + RecordSuffix)
	if out := r.start(t); out != NoAgent {
		t.Errorf("fast path without a record = %q, want %s", out, NoAgent)
	}
	r.mustEnsure(t)
	if fi2, _ := os.Stat(r.cached()); !os.SameFile(fi, fi2) {
		t.Error("uploaded again although the cached binary was the right one")
	}
	if out := r.start(t); out != "fake bulkmove agent /x" {
		t.Errorf("fast path after recording again = %q", out)
	}

	os.Chmod(home, 0o777)
	if out := r.start(t); out != NoAgent {
		t.Errorf("fast path with a world-writable home = %q, want %s", out, NoAgent)
	}
	if _, err := r.ensure(t); err == nil || !strings.Contains(err.Error(), home+" is writable by group or others (mode 777)") {
		t.Errorf("EnsureAgent with a world-writable home = %v", err)
	}
	os.Chmod(home, 0o700)
}

// TestCheckCacheStatFormats: GNU's and BSD's stat lines are read alike.
func TestCheckCacheStatFormats(t *testing.T) {
	for line, want := range map[string]statInfo{
		"0|700|directory|65024|12|4096|1|1":         {uid: "0", mode: "700", rawType: "directory", typ: "dir"},
		"501|755|Directory|16777220|12|64|1|1":      {uid: "501", mode: "755", rawType: "Directory", typ: "dir"},
		"501|755|Regular File|16777220|12|64|1|1":   {uid: "501", mode: "755", rawType: "Regular File", typ: "file"},
		"0|777|symbolic link|65024|12|4|1|1":        {uid: "0", mode: "777", rawType: "symbolic link", typ: "symlink", othersWrite: true},
		"1000|2775|directory|65024|12|4096|1|1":     {uid: "1000", mode: "2775", rawType: "directory", typ: "dir", othersWrite: true},
		"1000|1777|directory|65024|12|4096|1|1":     {uid: "1000", mode: "1777", rawType: "directory", typ: "dir", othersWrite: true},
		"1000|640|regular empty file|65024|1|0|1|1": {uid: "1000", mode: "640", rawType: "regular empty file", typ: "file"},
		"garbage": {uid: "garbage", typ: "other", othersWrite: true},
	} {
		if got := statFields(line); got != want {
			t.Errorf("statFields(%q) = %+v, want %+v", line, got, want)
		}
	}
	home := "/home/u"
	kv := map[string]string{"uid": "501", "d0": "501|755|Directory|1|2|3|4|5", "d1": "501|700|Directory|1|2|3|4|5",
		"d2": "501|775|Directory|1|2|3|4|5", "d3": "none"}
	cs := checkCache(kv, home, "v1", "abc")
	if cs.refuse != "" || len(cs.repairDirs) != 1 || cs.repairDirs[0] != "/home/u/.cache/bulkmove" ||
		len(cs.missing) != 1 || cs.missing[0] != "/home/u/.cache/bulkmove/v1" || cs.good {
		t.Errorf("checkCache = %+v", cs)
	}
	kv["d1"] = "502|700|Directory|1|2|3|4|5"
	if cs := checkCache(kv, home, "v1", "abc"); !strings.Contains(cs.refuse, "/home/u/.cache is owned by uid 502") {
		t.Errorf("checkCache with ~/.cache of another user = %+v", cs)
	}
	// Another push made ~/.cache/bulkmove/v1 between the stats of ~/.cache
	// and its children: the chain counts as missing (fixCache makes or finds
	// each and checks its own report), not as a refusal.
	raced := map[string]string{"uid": "501", "d0": "501|755|Directory|1|2|3|4|5", "d1": "none",
		"d2": "501|700|Directory|1|2|3|4|5", "d3": "501|700|Directory|1|2|3|4|5"}
	if cs := checkCache(raced, home, "v1", "abc"); cs.refuse != "" || len(cs.missing) != 3 || cs.missing[0] != "/home/u/.cache" || cs.good {
		t.Errorf("checkCache with ~/.cache made by another push between the stats = %+v", cs)
	}
	kv["d1"], kv["d0"] = "501|700|Directory|1|2|3|4|5", "501|775|Directory|1|2|3|4|5"
	if cs := checkCache(kv, home, "v1", "abc"); !strings.Contains(cs.refuse, "/home/u is writable by group or others (mode 775)") {
		t.Errorf("checkCache with a group-writable home = %+v", cs)
	}
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
