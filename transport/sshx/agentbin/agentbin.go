package agentbin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/bulkmove/bulkmove/internal/shell"
	"github.com/bulkmove/bulkmove/internal/units"
)

// CacheDir is where Ensure keeps uploaded binaries on the remote,
// relative to the remote $HOME: CacheDir/<version>/bulkmove, with its
// record (RecordSuffix) beside it.
const CacheDir = ".cache/bulkmove"

// RecordSuffix names the record Ensure writes next to a cached
// binary once it has hashed it: "SHA256|STAT", STAT being the binary's
// stat(2) fields as cacheShell's st prints them (owner, mode, type, device,
// inode, size, mtime, ctime). Command runs the binary only while both
// still hold.
const RecordSuffix = ".record"

// NoAgent is what Command's remote command prints when the remote has
// no bulkmove to run.
const NoAgent = "BULKMOVE-NOAGENT"

// versionPrefix is how `bulkmove version` of this very release starts
// (version.go prints "bulkmove VERSION (protocol N, ...)").
func versionPrefix(version string, proto int) string {
	return fmt.Sprintf("bulkmove %s (protocol %d,", version, proto)
}

// Command returns a remote command that runs `BULKMOVE ARGS` (args
// already shell-quoted) at once, without Ensure's round trips: with
// bulkmove from the remote PATH if its `bulkmove version` reports this
// version and protocol, else with this version's cached upload if its
// directories pass the StrictModes checks above, its record says it was
// hashed as sum (the hash of this very binary: development builds share a
// version string), and its stat(2) fields are still those recorded. If
// neither, it prints NoAgent and exits 127, and Ensure looks further:
// it checks everything again, hashes the binary, and installs it anew if it
// must. All in one remote command: nothing costs a round trip.
func Command(version string, proto int, sum, args string) string {
	ver := sanitizeVersion(version)
	var dirs []string
	for _, d := range cacheDirs(ver) {
		dirs = append(dirs, "okd "+d)
	}
	script := `if p=$(command -v bulkmove 2>/dev/null) && [ -x "$p" ]; then ` +
		`case $("$p" version </dev/null 2>/dev/null) in ` + shell.Quote(versionPrefix(version, proto)) + `*) exec "$p" ` + args + `;; esac; fi; ` +
		cacheShell +
		`c="$HOME/` + CacheDir + `/` + ver + `/bulkmove"; ` +
		`if ` + strings.Join(dirs, " && ") + ` && b=$(st "$c") && [ "${b%%|*}" = "$u" ] && ` +
		`[ "$(cat "$c` + RecordSuffix + `" 2>/dev/null)" = ` + shell.Quote(sum) + `"|$b" ]; then exec "$c" ` + args + `; fi; ` +
		`echo ` + NoAgent + `; exit 127`
	return "sh -c " + shell.Quote(script)
}

// Sum is the SHA-256 of the file at p, in hex (as Command and
// Ensure compare it).
func Sum(p string) (string, error) {
	sum, _, err := fileSHA256(p)
	return sum, err
}

// Ensure finds a usable remote bulkmove and returns the path to run it
// by (absolute, or as given):
//
//   - remotePath if given (--remote-bulkmove; "~/" is the remote home), which
//     must answer `version --proto` with wantProto;
//   - else `bulkmove` on the remote PATH if its `bulkmove version` reports
//     this version and wantProto (a packaged install of the same release);
//   - else ~/.cache/bulkmove/<version>/bulkmove if its directories pass the
//     StrictModes checks (see cacheShell) and it is the same file as
//     localBinary (same SHA-256), owned by the user and writable by no one
//     else; its record is then written for Command;
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
func Ensure(ctx context.Context, r Remote, remotePath, version string, wantProto int, localBinary string) (string, error) {
	want := strconv.Itoa(wantProto)
	if remotePath != "" {
		p, out, rc, err := tryRemote(ctx, r, remotePath)
		if err != nil {
			return "", err
		}
		got := firstLine(out)
		switch {
		case rc != 0:
			return "", &kindError{kind: ErrUnsupportedRemote, msg: fmt.Sprintf(
				"ssh %s: --remote-bulkmove %s does not run there (exit status %d): %s", r.Host(), remotePath, rc, shell.LastLines(out, 3))}
		case got != want:
			return "", protoError(r.Host(), remotePath, got, wantProto)
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
	out, err := r.Output(ctx, "sh -c "+shell.Quote(probe))
	if err != nil {
		return "", fmt.Errorf("ssh %s: looking for bulkmove on the remote: %w", r.Host(), err)
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
		return "", fmt.Errorf("ssh %s: remote $HOME is %q: cannot cache bulkmove there; pass --remote-bulkmove", r.Host(), home)
	}
	dir := path.Join(home, CacheDir, ver)
	final := path.Join(dir, "bulkmove")

	cs := checkCache(kv, home, ver, sum)
	if cs.refuse != "" {
		return "", unsafeCache(r, cs.refuse)
	}
	if cs.good && cs.recorded {
		return final, nil
	}
	uname := kv["uname"]
	if len(cs.missing) > 0 || len(cs.repairDirs) > 0 || kv["cachesum"] == sum {
		recorded, err := fixCache(ctx, r, cs, home, ver, sum)
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
			r.Host(), onPath, what, uname, runtime.GOOS, runtime.GOARCH, version, wantProto, what)}
	}

	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".bulkmove.tmp."+hex.EncodeToString(rnd[:]))
	r.Note(fmt.Sprintf("uploading bulkmove (%s/%s, %s) to %s:%s", runtime.GOOS, runtime.GOARCH,
		units.Size(size), r.Host(), final))
	if err := upload(ctx, r, localBinary, tmp); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = r.Output(cctx, "rm -f "+shell.Quote(tmp))
		cancel()
		return "", fmt.Errorf("ssh %s: uploading bulkmove to %s: %w", r.Host(), tmp, err)
	}
	// The record is written last, from the file as it is after the
	// rename (which changes its ctime).
	install := cacheShell + `t=` + shell.Quote(tmp) + `; f=` + shell.Quote(final) + `; ` +
		`s=$(h "$t"); ` +
		`if [ "$s" != "` + sum + `" ]; then rm -f "$t"; printf 'checksum=%s\n' "$s"; exit 3; fi; ` +
		`chmod 0755 "$t" || { rm -f "$t"; exit 4; }; ` +
		`p=$("$t" version --proto </dev/null 2>&1); r=$?; ` +
		`if [ "$p" != "` + want + `" ]; then rm -f "$t"; printf 'rc=%s\n%s\n' "$r" "$p"; exit 5; fi; ` +
		`mv -f "$t" "$f" || { rm -f "$t"; exit 6; }; ` +
		`s1=$(st "$f") && printf '%s|%s\n' "$s" "$s1" > "$f` + RecordSuffix + `"`
	out, err = r.Output(ctx, "sh -c "+shell.Quote(install))
	if err != nil {
		if status, stderr, ok := r.ExitStatus(err); ok {
			switch status {
			case 3:
				return "", fmt.Errorf("ssh %s: uploaded bulkmove to %s but its SHA-256 there is %q, not %s: %s",
					r.Host(), tmp, firstLine(strings.TrimPrefix(string(out), "checksum=")), sum, shell.LastLines(stderr, 3))
			case 5:
				return "", &kindError{kind: ErrUnsupportedRemote, msg: fmt.Sprintf(
					"ssh %s: the uploaded bulkmove does not run there (is %s mounted noexec?): `version --proto` gave %q; "+
						"install bulkmove on the remote PATH or pass --remote-bulkmove PATH",
					r.Host(), dir, shell.LastLines(string(out), 3))}
			}
		}
		return "", fmt.Errorf("ssh %s: installing bulkmove at %s: %w", r.Host(), final, err)
	}
	return final, nil
}

func orUnknownVersion(s string) string {
	if s == "" {
		return "nothing to `bulkmove version`"
	}
	return strconv.Quote(s)
}

// tryRemote runs `P version --proto` for a user-given path P and returns P
// as the shell resolves it.
func tryRemote(ctx context.Context, r Remote, p string) (resolved, out string, rc int, err error) {
	q := shell.Quote(p)
	if strings.HasPrefix(p, "~/") {
		q = `"$HOME"/` + shell.Quote(p[2:])
	}
	script := `p=` + q + `; printf 'path=%s\n' "$p"; o=$("$p" version --proto </dev/null 2>&1); r=$?; ` +
		`printf 'rc=%s\n' "$r"; printf '%s\n' "$o"`
	b, err := r.Output(ctx, "sh -c "+shell.Quote(script))
	if err != nil {
		return "", "", 0, fmt.Errorf("ssh %s: trying --remote-bulkmove %s: %w", r.Host(), p, err)
	}
	s := string(b)
	line, s, _ := strings.Cut(s, "\n")
	resolved = strings.TrimPrefix(line, "path=")
	line, s, _ = strings.Cut(s, "\n")
	rc, _ = strconv.Atoi(strings.TrimPrefix(line, "rc="))
	return resolved, strings.TrimSpace(s), rc, nil
}

// upload copies local to tmp, in a directory Ensure made 0700.
func upload(ctx context.Context, r Remote, local, tmp string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	conn := r.SSH()
	if conn == nil {
		return uploadCat(ctx, r, f, tmp)
	}
	sc, err := sftp.NewClient(conn, sftp.UseConcurrentWrites(true))
	if err != nil {
		// No sftp subsystem: stream it through cat.
		return uploadCat(ctx, r, f, tmp)
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

func uploadCat(ctx context.Context, r Remote, f io.Reader, tmp string) error {
	s, err := r.Start(ctx, "umask 077 && cat > "+shell.Quote(tmp))
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
