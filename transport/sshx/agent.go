package sshx

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/bulkmove/bulkmove/internal/units"
)

// CacheDir is where EnsureAgent keeps uploaded binaries on the remote,
// relative to the remote $HOME: CacheDir/<version>/bulkmove, with its
// record (RecordSuffix) beside it.
const CacheDir = ".cache/bulkmove"

// RecordSuffix names the record EnsureAgent writes next to a cached
// binary once it has hashed it: "SHA256|STAT", STAT being the binary's
// stat(2) fields as cacheShell's st prints them (owner, mode, type, device,
// inode, size, mtime, ctime). AgentCommand runs the binary only while both
// still hold.
const RecordSuffix = ".record"

// NoAgent is what the command of AgentCommand prints when the remote has
// no bulkmove to run.
const NoAgent = "BULKMOVE-NOAGENT"

// The cache is trusted only as far as its directories are, as sshd's
// StrictModes trusts a home: every directory from the cache's up to the
// home (that one included) must be owned by the remote user or root, be no
// symbolic link, and be writable by neither group nor others; the binary
// must be owned by the user, writable by nobody else, and be the very file
// that was hashed (the record). Anyone who can write to one of these
// directories could otherwise put their own program where the next push
// runs it.
//
// cacheShell defines, for the remote shell: u, the remote uid; st PATH
// [-L], the fields of PATH's stat(2) as one line (GNU or busybox stat -c,
// else BSD stat -f; lstat unless -L), or failure without a stat(1); sok
// PATH d|f [-L], whether PATH is such a directory (owned by u or root) or
// such a binary (a regular file owned by u); okd PATH [-L], sok for a
// directory; and h PATH, PATH's SHA-256.
const cacheShell = `u=$(id -u); ` +
	`st() { stat $2 -c '%u|%a|%F|%d|%i|%s|%Y|%Z' -- "$1" 2>/dev/null || stat $2 -f '%u|%Lp|%HT|%d|%i|%z|%m|%c' -- "$1" 2>/dev/null; }; ` +
	`sok() { _s=$(st "$1" $3) || return 1; _o=${_s%%|*}; _s=${_s#*|}; _m=${_s%%|*}; _s=${_s#*|}; _t=${_s%%|*}; ` +
	`[ -n "$u" ] && { [ "$_o" = "$u" ] || { [ "$2" = d ] && [ "$_o" = 0 ]; }; } || return 1; ` +
	`case $_m in *[2367]?|*[2367]) return 1;; esac; case $2$_t in d[Dd]irectory|f[Rr]egular*) return 0;; esac; return 1; }; ` +
	`okd() { sok "$1" d $2; }; ` +
	`h() { (sha256sum "$1" || shasum -a 256 "$1") 2>/dev/null | cut -d ' ' -f 1; }; `

// cacheDirs are the directories checked, home first, as shell words (with
// $HOME unexpanded) and okd's extra argument: the home is checked through
// symbolic links (its parents are the system's), the rest not.
func cacheDirs(ver string) []string {
	return []string{`"$HOME" -L`, `"$HOME/.cache"`, `"$HOME/` + CacheDir + `"`, `"$HOME/` + CacheDir + `/` + ver + `"`}
}

// versionPrefix is how `bulkmove version` of this very release starts
// (version.go prints "bulkmove VERSION (protocol N, ...)").
func versionPrefix(version string, proto int) string {
	return fmt.Sprintf("bulkmove %s (protocol %d,", version, proto)
}

// AgentCommand returns a remote command that runs `BULKMOVE ARGS` (args
// already shell-quoted) at once, without EnsureAgent's round trips: with
// bulkmove from the remote PATH if its `bulkmove version` reports this
// version and protocol, else with this version's cached upload if its
// directories pass the StrictModes checks above, its record says it was
// hashed as sum (the hash of this very binary: development builds share a
// version string), and its stat(2) fields are still those recorded. If
// neither, it prints NoAgent and exits 127, and EnsureAgent looks further:
// it checks everything again, hashes the binary, and installs it anew if it
// must. All in one remote command: nothing costs a round trip.
func AgentCommand(version string, proto int, sum, args string) string {
	ver := sanitizeVersion(version)
	var dirs []string
	for _, d := range cacheDirs(ver) {
		dirs = append(dirs, "okd "+d)
	}
	script := `if p=$(command -v bulkmove 2>/dev/null) && [ -x "$p" ]; then ` +
		`case $("$p" version </dev/null 2>/dev/null) in ` + ShellQuote(versionPrefix(version, proto)) + `*) exec "$p" ` + args + `;; esac; fi; ` +
		cacheShell +
		`c="$HOME/` + CacheDir + `/` + ver + `/bulkmove"; ` +
		`if ` + strings.Join(dirs, " && ") + ` && b=$(st "$c") && [ "${b%%|*}" = "$u" ] && ` +
		`[ "$(cat "$c` + RecordSuffix + `" 2>/dev/null)" = ` + ShellQuote(sum) + `"|$b" ]; then exec "$c" ` + args + `; fi; ` +
		`echo ` + NoAgent + `; exit 127`
	return "sh -c " + ShellQuote(script)
}

// BinarySum is the SHA-256 of the file at p, in hex (as AgentCommand and
// EnsureAgent compare it).
func BinarySum(p string) (string, error) {
	sum, _, err := fileSHA256(p)
	return sum, err
}

// EnsureAgent finds a usable remote bulkmove and returns the path to run it
// by (absolute, or as given):
//
//   - remotePath if given (--remote-bulkmove; "~/" is the remote home), which
//     must answer `version --proto` with wantProto;
//   - else `bulkmove` on the remote PATH if its `bulkmove version` reports
//     this version and wantProto (a packaged install of the same release);
//   - else ~/.cache/bulkmove/<version>/bulkmove if its directories pass the
//     StrictModes checks (see cacheShell) and it is the same file as
//     localBinary (same SHA-256), owned by the user and writable by no one
//     else; its record is then written for AgentCommand;
//   - else, if the remote's `uname -sm` is runtime.GOOS/GOARCH, localBinary
//     ("" means this executable) uploaded there (to a temporary name in
//     directories created 0700, then its SHA-256 checked with sha256sum,
//     chmod 0755, checked to run and answer wantProto, renamed, and
//     recorded).
//
// Cache directories that bulkmove made (~/.cache/bulkmove and below) and
// that are writable by group or others are made 0700 again, with a
// warning, and what they hold is checked afresh; a symbolic link, a
// directory owned by another user, or an unsafe home or ~/.cache is an
// error (ErrUnsafeCache) that names it. Otherwise it fails with an error
// naming what the remote has (ErrProtocol or ErrUnsupportedRemote) and how
// to supply a binary.
func (c *Client) EnsureAgent(ctx context.Context, remotePath, version string, wantProto int, localBinary string) (string, error) {
	want := strconv.Itoa(wantProto)
	if remotePath != "" {
		p, out, rc, err := c.tryRemote(ctx, remotePath)
		if err != nil {
			return "", err
		}
		got := firstLine(out)
		switch {
		case rc != 0:
			return "", &kindError{kind: ErrUnsupportedRemote, msg: fmt.Sprintf(
				"ssh %s: --remote-bulkmove %s does not run there (exit status %d): %s", c.alias, remotePath, rc, lastLines(out, 3))}
		case got != want:
			return "", protoError(c.alias, remotePath, got, wantProto)
		}
		return p, nil
	}

	ver := sanitizeVersion(version)
	var err error
	if localBinary == "" {
		if localBinary, err = os.Executable(); err != nil {
			return "", fmt.Errorf("finding this executable to upload: %w", err)
		}
	}
	sum, size, err := fileSHA256(localBinary)
	if err != nil {
		return "", fmt.Errorf("reading %s to upload it: %w", localBinary, err)
	}
	probe := `printf 'uname=%s\n' "$(uname -sm 2>/dev/null)"; printf 'home=%s\n' "$HOME"; ` +
		`if p=$(command -v bulkmove 2>/dev/null); then printf 'path=%s\n' "$p"; ` +
		`printf 'pathversion=%s\n' "$("$p" version </dev/null 2>/dev/null | head -n 1)"; fi; ` +
		cacheShell + cacheReport(ver)
	out, err := c.Output(ctx, "sh -c "+ShellQuote(probe))
	if err != nil {
		return "", fmt.Errorf("ssh %s: looking for bulkmove on the remote: %w", c.alias, err)
	}
	kv := parseKV(out)
	onPath := ""
	if p := kv["path"]; p != "" {
		if strings.HasPrefix(kv["pathversion"], versionPrefix(version, wantProto)) {
			return p, nil
		}
		onPath = fmt.Sprintf("; its PATH has %s, which reports %s, not %q", p, orUnknownVersion(kv["pathversion"]), versionPrefix(version, wantProto)+" ...)")
	}
	home := kv["home"]
	if home == "" || !strings.HasPrefix(home, "/") {
		return "", fmt.Errorf("ssh %s: remote $HOME is %q: cannot cache bulkmove there; pass --remote-bulkmove", c.alias, home)
	}
	dir := path.Join(home, CacheDir, ver)
	final := path.Join(dir, "bulkmove")

	cs := checkCache(kv, home, ver, sum)
	if cs.refuse != "" {
		return "", c.unsafeCache(cs.refuse)
	}
	if cs.good && cs.recorded {
		return final, nil
	}
	uname := kv["uname"]
	if len(cs.missing) > 0 || len(cs.repairDirs) > 0 || kv["cachesum"] == sum {
		recorded, err := c.fixCache(ctx, cs, home, ver, sum)
		if err != nil {
			return "", err
		}
		if recorded {
			return final, nil
		}
	}

	goos, goarch, known := goPlatform(uname)
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		what := goos + "/" + goarch
		if !known {
			what = "an unsupported platform"
		}
		return "", &kindError{kind: ErrUnsupportedRemote, msg: fmt.Sprintf(
			"ssh %s: the remote has no usable bulkmove%s, and it is %s (uname -sm: %q) while this bulkmove is built for %s/%s: "+
				"install bulkmove %s (protocol %d) on its PATH, or copy a %s build there and pass --remote-bulkmove PATH",
			c.alias, onPath, what, uname, runtime.GOOS, runtime.GOARCH, version, wantProto, what)}
	}

	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".bulkmove.tmp."+hex.EncodeToString(rnd[:]))
	c.notes.print(fmt.Sprintf("uploading bulkmove (%s/%s, %s) to %s:%s", runtime.GOOS, runtime.GOARCH,
		units.Size(size), c.alias, final))
	if err := c.upload(ctx, localBinary, tmp); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = c.Output(cctx, "rm -f "+ShellQuote(tmp))
		cancel()
		return "", fmt.Errorf("ssh %s: uploading bulkmove to %s: %w", c.alias, tmp, err)
	}
	// The record is written last, from the file as it is after the
	// rename (which changes its ctime).
	install := cacheShell + `t=` + ShellQuote(tmp) + `; f=` + ShellQuote(final) + `; ` +
		`s=$(h "$t"); ` +
		`if [ "$s" != "` + sum + `" ]; then rm -f "$t"; printf 'checksum=%s\n' "$s"; exit 3; fi; ` +
		`chmod 0755 "$t" || { rm -f "$t"; exit 4; }; ` +
		`p=$("$t" version --proto </dev/null 2>&1); r=$?; ` +
		`if [ "$p" != "` + want + `" ]; then rm -f "$t"; printf 'rc=%s\n%s\n' "$r" "$p"; exit 5; fi; ` +
		`mv -f "$t" "$f" || { rm -f "$t"; exit 6; }; ` +
		`s1=$(st "$f") && printf '%s|%s\n' "$s" "$s1" > "$f` + RecordSuffix + `"`
	out, err = c.Output(ctx, "sh -c "+ShellQuote(install))
	if err != nil {
		var xe *ExitError
		if errors.As(err, &xe) {
			switch xe.Status {
			case 3:
				return "", fmt.Errorf("ssh %s: uploaded bulkmove to %s but its SHA-256 there is %q, not %s: %s",
					c.alias, tmp, firstLine(strings.TrimPrefix(string(out), "checksum=")), sum, lastLines(xe.Stderr, 3))
			case 5:
				return "", &kindError{kind: ErrUnsupportedRemote, msg: fmt.Sprintf(
					"ssh %s: the uploaded bulkmove does not run there (is %s mounted noexec?): `version --proto` gave %q; "+
						"install bulkmove on the remote PATH or pass --remote-bulkmove PATH",
					c.alias, dir, lastLines(string(out), 3))}
			}
		}
		return "", fmt.Errorf("ssh %s: installing bulkmove at %s: %w", c.alias, final, err)
	}
	return final, nil
}

// fixCache makes the cache's missing directories (0700) and repairs those
// that others could write to (cs, from checkCache); then, in the same
// command, it hashes the cached binary again (it may have changed while
// others could write there) and records it if it is the one. It reports
// whether it did.
func (c *Client) fixCache(ctx context.Context, cs cacheState, home, ver, sum string) (recorded bool, err error) {
	for _, r := range cs.repair {
		c.notes.warn(fmt.Sprintf("ssh %s: %s: made it 0700; the cached bulkmove in it is checked afresh", c.alias, r))
	}
	var fix strings.Builder
	fix.WriteString(cacheShell)
	for _, d := range cs.missing {
		// Another push may make it at the same time: what it made is
		// checked below like the rest.
		fmt.Fprintf(&fix, "mkdir -m 0700 %[1]s 2>/dev/null || [ -d %[1]s ] || exit 3; ", ShellQuote(d))
	}
	for _, d := range cs.repairDirs {
		fmt.Fprintf(&fix, "chmod 0700 %s || exit 3; ", ShellQuote(d))
	}
	fix.WriteString(cacheReport(ver))
	fmt.Fprintf(&fix, `if [ "$dirsok" = 1 ] && sok "$c" f; then s1=$(st "$c"); s=$(h "$c"); s2=$(st "$c"); `+
		`if [ -n "$s1" ] && [ "$s1" = "$s2" ] && [ "$s" = %s ]; then printf '%%s|%%s\n' "$s" "$s1" > "$c%s" && printf 'recorded=1\n'; fi; fi`,
		ShellQuote(sum), RecordSuffix)
	out, err := c.Output(ctx, "sh -c "+ShellQuote(fix.String()))
	if err != nil {
		return false, fmt.Errorf("ssh %s: making the agent cache %s: %w", c.alias, path.Join(home, CacheDir, ver), err)
	}
	kv := parseKV(out)
	cs = checkCache(kv, home, ver, sum)
	switch {
	case cs.refuse != "":
		return false, c.unsafeCache(cs.refuse)
	case len(cs.missing) > 0 || len(cs.repair) > 0:
		return false, c.unsafeCache(fmt.Sprintf("%s is still not safe after mkdir and chmod", path.Join(home, CacheDir, ver)))
	}
	return cs.good && kv["recorded"] == "1", nil
}

func (c *Client) unsafeCache(why string) error {
	return &kindError{kind: ErrUnsafeCache, msg: fmt.Sprintf("ssh %s: %s: refusing to run or keep bulkmove there; "+
		"make it a directory of yours that only you can write to, or pass --remote-bulkmove", c.alias, why)}
}

// cacheReport is shell that prints, for each of cacheDirs, "dN=" and its
// stat line, "none" if it does not exist, or "nostat" if stat(1) cannot
// tell; "dirsok=1" if all pass okd; then "uid=", and for the binary
// "bin=" (its stat line), "record=" (its record) and "cachesum=" (its
// SHA-256, if it is a regular file). It sets c to the binary's path.
func cacheReport(ver string) string {
	var b strings.Builder
	b.WriteString(`printf 'uid=%s\n' "$u"; ok=1; `)
	for i, d := range cacheDirs(ver) {
		w, flag, _ := strings.Cut(d, " ")
		fmt.Fprintf(&b, `if [ -e %[1]s ] || [ -L %[1]s ]; then printf 'd%[2]d=%%s\n' "$(st %[1]s %[3]s || echo nostat)"; else printf 'd%[2]d=none\n'; fi; `+
			`okd %[1]s %[3]s || ok=0; `, w, i, flag)
	}
	b.WriteString(`printf 'dirsok=%s\n' "$ok"; dirsok=$ok; c="$HOME/` + CacheDir + `/` + ver + `/bulkmove"; ` +
		`if [ -e "$c" ] || [ -L "$c" ]; then printf 'bin=%s\n' "$(st "$c" || echo nostat)"; ` +
		`printf 'record=%s\n' "$(head -n 1 "$c` + RecordSuffix + `" 2>/dev/null)"; ` +
		`if [ -f "$c" ] && [ ! -L "$c" ]; then printf 'cachesum=%s\n' "$(h "$c")"; fi; fi; `)
	return b.String()
}

// cacheState is what checkCache makes of cacheReport's lines.
type cacheState struct {
	refuse     string   // why the cache must not be used, if it must not
	missing    []string // directories to create, outermost first
	repair     []string // directories bulkmove made that others can write to (messages)
	repairDirs []string // and their paths
	good       bool     // the binary is there, this one, and safe
	recorded   bool     // and its record is up to date
}

// checkCache judges the cache's directories and binary from cacheReport's
// lines, as okd and AgentCommand do, to name what is wrong.
func checkCache(kv map[string]string, home, ver, sum string) cacheState {
	var cs cacheState
	uid := kv["uid"]
	if uid == "" {
		cs.refuse = "cannot tell the remote user's uid (`id -u` printed nothing)"
		return cs
	}
	paths := []string{home, path.Join(home, ".cache"), path.Join(home, CacheDir), path.Join(home, CacheDir, ver)}
	for i, p := range paths {
		v := kv[fmt.Sprintf("d%d", i)]
		switch v {
		case "none":
			if i == 0 {
				cs.refuse = fmt.Sprintf("the home directory %s does not exist", p)
				return cs
			}
			cs.missing = append(cs.missing, p)
			continue
		case "nostat", "":
			cs.refuse = fmt.Sprintf("cannot check %s (no stat(1) there that bulkmove knows)", p)
			return cs
		}
		if len(cs.missing) > 0 {
			// Made by another push between the stats: made again or
			// found by fixCache, whose report is checked afresh.
			cs.missing = append(cs.missing, p)
			continue
		}
		f := statFields(v)
		switch {
		case f.typ == "symlink":
			cs.refuse = fmt.Sprintf("%s is a symbolic link", p)
			return cs
		case f.typ != "dir":
			cs.refuse = fmt.Sprintf("%s is not a directory (%s)", p, f.rawType)
			return cs
		case f.uid != uid && f.uid != "0":
			cs.refuse = fmt.Sprintf("%s is owned by uid %s, not by you (uid %s) or root", p, f.uid, uid)
			return cs
		case f.othersWrite:
			// Only the directories bulkmove makes are repaired: the
			// home and ~/.cache are the user's to decide on.
			if i < 2 || f.uid != uid {
				cs.refuse = fmt.Sprintf("%s is writable by group or others (mode %s)", p, f.mode)
				return cs
			}
			cs.repair = append(cs.repair, fmt.Sprintf("%s was writable by group or others (mode %s)", p, f.mode))
			cs.repairDirs = append(cs.repairDirs, p)
		}
	}
	bin := kv["bin"]
	if bin == "" || len(cs.missing) > 0 {
		return cs
	}
	f := statFields(bin)
	cs.good = len(cs.repair) == 0 && kv["dirsok"] == "1" && f.typ == "file" && f.uid == uid && !f.othersWrite && kv["cachesum"] == sum
	cs.recorded = cs.good && kv["record"] == sum+"|"+bin
	return cs
}

// statInfo is one stat line of cacheShell's st.
type statInfo struct {
	uid, mode, rawType string
	typ                string // "dir", "file", "symlink" or "other"
	othersWrite        bool
}

func statFields(line string) statInfo {
	f := strings.Split(line, "|")
	for len(f) < 3 {
		f = append(f, "")
	}
	si := statInfo{uid: f[0], mode: f[1], rawType: f[2]}
	switch strings.ToLower(f[2]) {
	case "directory":
		si.typ = "dir"
	case "regular file", "regular empty file":
		si.typ = "file"
	case "symbolic link":
		si.typ = "symlink"
	default:
		si.typ = "other"
	}
	m, err := strconv.ParseUint(f[1], 8, 32)
	si.othersWrite = err != nil || m&0o022 != 0
	return si
}

func parseKV(out []byte) map[string]string {
	kv := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			if _, dup := kv[k]; !dup {
				kv[k] = strings.TrimSpace(v)
			}
		}
	}
	return kv
}

func orUnknownVersion(s string) string {
	if s == "" {
		return "nothing to `bulkmove version`"
	}
	return strconv.Quote(s)
}

// tryRemote runs `P version --proto` for a user-given path P and returns P
// as the shell resolves it.
func (c *Client) tryRemote(ctx context.Context, p string) (resolved, out string, rc int, err error) {
	q := ShellQuote(p)
	if strings.HasPrefix(p, "~/") {
		q = `"$HOME"/` + ShellQuote(p[2:])
	}
	script := `p=` + q + `; printf 'path=%s\n' "$p"; o=$("$p" version --proto </dev/null 2>&1); r=$?; ` +
		`printf 'rc=%s\n' "$r"; printf '%s\n' "$o"`
	b, err := c.Output(ctx, "sh -c "+ShellQuote(script))
	if err != nil {
		return "", "", 0, fmt.Errorf("ssh %s: trying --remote-bulkmove %s: %w", c.alias, p, err)
	}
	s := string(b)
	line, s, _ := strings.Cut(s, "\n")
	resolved = strings.TrimPrefix(line, "path=")
	line, s, _ = strings.Cut(s, "\n")
	rc, _ = strconv.Atoi(strings.TrimPrefix(line, "rc="))
	return resolved, strings.TrimSpace(s), rc, nil
}

// upload copies local to tmp, in a directory EnsureAgent made 0700.
func (c *Client) upload(ctx context.Context, local, tmp string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	sc, err := sftp.NewClient(c.ssh, sftp.UseConcurrentWrites(true))
	if err != nil {
		// No sftp subsystem: stream it through cat.
		return c.uploadCat(ctx, f, tmp)
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()
	rf, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	if _, err := rf.ReadFrom(f); err != nil {
		rf.Close()
		return err
	}
	if err := rf.Close(); err != nil {
		return err
	}
	return ctx.Err()
}

func (c *Client) uploadCat(ctx context.Context, f io.Reader, tmp string) error {
	s, err := c.Start(ctx, "umask 077 && cat > "+ShellQuote(tmp))
	if err != nil {
		return err
	}
	if _, err := io.Copy(s, f); err != nil {
		s.Close()
		return err
	}
	if err := s.CloseWrite(); err != nil {
		s.Close()
		return err
	}
	return s.Wait()
}

func protoError(host, p, got string, want int) error {
	return &kindError{kind: ErrProtocol, msg: fmt.Sprintf(
		"ssh %s: remote bulkmove %s speaks protocol %s, this bulkmove speaks %d: install the same bulkmove version on both sides",
		host, p, orUnknown(got), want)}
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown: `version --proto` printed nothing)"
	}
	return strconv.Quote(s)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}

// sanitizeVersion makes version safe as one path component.
func sanitizeVersion(v string) string {
	if v == "" {
		return "unknown"
	}
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '+') {
			b[i] = '_'
		}
	}
	if b[0] == '.' {
		b[0] = '_'
	}
	return string(b)
}

func fileSHA256(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// goPlatform maps `uname -sm` output to GOOS/GOARCH.
func goPlatform(uname string) (goos, goarch string, ok bool) {
	f := strings.Fields(uname)
	if len(f) != 2 {
		return "", "", false
	}
	goos = strings.ToLower(f[0])
	switch goos {
	case "linux", "darwin", "freebsd", "openbsd", "netbsd", "dragonfly", "solaris", "aix":
	case "sunos":
		goos = "solaris"
	default:
		return goos, f[1], false
	}
	switch m := f[1]; m {
	case "x86_64", "amd64":
		goarch = "amd64"
	case "aarch64", "arm64", "aarch64_be":
		goarch = "arm64"
	case "i386", "i486", "i586", "i686", "x86":
		goarch = "386"
	case "riscv64", "ppc64", "ppc64le", "s390x", "mips", "mipsle", "mips64", "mips64le", "loong64":
		goarch = m
	case "loongarch64":
		goarch = "loong64"
	default:
		if strings.HasPrefix(m, "armv") || m == "arm" {
			goarch = "arm"
		} else {
			return goos, m, false
		}
	}
	return goos, goarch, true
}
