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
)

// CacheDir is where EnsureAgent keeps uploaded binaries on the remote,
// relative to the remote $HOME: CacheDir/<version>/bulkmove.
const CacheDir = ".cache/bulkmove"

// NoAgent is what the command of AgentCommand prints when the remote has
// no bulkmove to run.
const NoAgent = "BULKMOVE-NOAGENT"

// AgentCommand returns a remote command that runs `BULKMOVE ARGS` (args
// already shell-quoted) at once, without EnsureAgent's round trips: with
// bulkmove from the remote PATH, else with this version's cached upload if
// its recorded SHA-256 (CacheDir/VERSION/bulkmove.sha256, written by
// EnsureAgent) is sum, the hash of this very binary (development builds
// share a version string); if there is neither, it prints NoAgent and
// exits 127. Whether that bulkmove speaks our protocol is for the caller's
// handshake to find out; if it does not, EnsureAgent then finds or
// installs one that does.
func AgentCommand(version, sum, args string) string {
	script := `c="$HOME/` + CacheDir + `/` + sanitizeVersion(version) + `/bulkmove"; ` +
		`if p=$(command -v bulkmove 2>/dev/null) && [ -x "$p" ]; then exec "$p" ` + args + `; fi; ` +
		`if [ -x "$c" ] && [ "$(cat "$c.sha256" 2>/dev/null)" = ` + ShellQuote(sum) + ` ]; then exec "$c" ` + args + `; fi; ` +
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
//   - else `bulkmove` on the remote PATH if its `bulkmove version --proto`
//     prints wantProto;
//   - else ~/.cache/bulkmove/<version>/bulkmove if it is the same file as
//     localBinary (same SHA-256);
//   - else, if the remote's `uname -sm` is runtime.GOOS/GOARCH, localBinary
//     ("" means this executable) uploaded there with SFTP (to a temporary
//     name, then its SHA-256 checked with sha256sum, chmod 0755, checked to
//     run and answer wantProto, and renamed).
//
// Otherwise it fails with an error naming what the remote has (ErrProtocol or
// ErrUnsupportedRemote) and how to supply a binary.
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
	// The cached binary, if it is this one, gets its hash recorded for
	// AgentCommand.
	probe := `printf 'uname=%s\n' "$(uname -sm 2>/dev/null)"; printf 'home=%s\n' "$HOME"; ` +
		`if p=$(command -v bulkmove 2>/dev/null); then printf 'path=%s\n' "$p"; ` +
		`printf 'proto=%s\n' "$("$p" version --proto </dev/null 2>/dev/null | head -n 1)"; fi; ` +
		`c="$HOME/` + CacheDir + `/` + ver + `/bulkmove"; ` +
		`if [ -f "$c" ]; then s=$( (sha256sum "$c" || shasum -a 256 "$c") 2>/dev/null | cut -d ' ' -f 1); printf 'cachesum=%s\n' "$s"; ` +
		`if [ "$s" = ` + sum + ` ]; then printf '%s\n' "$s" > "$c.sha256"; fi; fi`
	out, err := c.Output(ctx, "sh -c "+ShellQuote(probe))
	if err != nil {
		return "", fmt.Errorf("ssh %s: looking for bulkmove on the remote: %w", c.alias, err)
	}
	kv := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			if _, dup := kv[k]; !dup {
				kv[k] = strings.TrimSpace(v)
			}
		}
	}
	onPath := ""
	if p := kv["path"]; p != "" {
		if kv["proto"] == want {
			return p, nil
		}
		onPath = fmt.Sprintf("; its PATH has %s, which speaks protocol %s, not %d", p, orUnknown(kv["proto"]), wantProto)
	}
	home := kv["home"]
	if home == "" || !strings.HasPrefix(home, "/") {
		return "", fmt.Errorf("ssh %s: remote $HOME is %q: cannot cache bulkmove there; pass --remote-bulkmove", c.alias, home)
	}
	dir := path.Join(home, CacheDir, ver)
	final := path.Join(dir, "bulkmove")

	if kv["cachesum"] == sum {
		return final, nil
	}

	uname := kv["uname"]
	goos, goarch, known := goPlatform(uname)
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		what := goos + "/" + goarch
		if !known {
			what = "an unsupported platform"
		}
		return "", &kindError{kind: ErrUnsupportedRemote, msg: fmt.Sprintf(
			"ssh %s: the remote has no usable bulkmove%s, and it is %s (uname -sm: %q) while this bulkmove is built for %s/%s: "+
				"install bulkmove (protocol %d) on its PATH, or copy a %s build there and pass --remote-bulkmove PATH",
			c.alias, onPath, what, uname, runtime.GOOS, runtime.GOARCH, wantProto, what)}
	}

	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".bulkmove.tmp."+hex.EncodeToString(rnd[:]))
	c.notes.print(fmt.Sprintf("uploading bulkmove (%s/%s, %.1f MB) to %s:%s", runtime.GOOS, runtime.GOARCH,
		float64(size)/1e6, c.alias, final))
	if err := c.upload(ctx, localBinary, dir, tmp); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = c.Output(cctx, "rm -f "+ShellQuote(tmp))
		cancel()
		return "", fmt.Errorf("ssh %s: uploading bulkmove to %s: %w", c.alias, tmp, err)
	}
	install := `t=` + ShellQuote(tmp) + `; f=` + ShellQuote(final) + `; ` +
		`s=$( (sha256sum "$t" || shasum -a 256 "$t") 2>/dev/null | cut -d ' ' -f 1); ` +
		`if [ "$s" != "` + sum + `" ]; then rm -f "$t"; printf 'checksum=%s\n' "$s"; exit 3; fi; ` +
		`chmod 0755 "$t" || { rm -f "$t"; exit 4; }; ` +
		`p=$("$t" version --proto </dev/null 2>&1); r=$?; ` +
		`if [ "$p" != "` + want + `" ]; then rm -f "$t"; printf 'rc=%s\n%s\n' "$r" "$p"; exit 5; fi; ` +
		`mv -f "$t" "$f" || { rm -f "$t"; exit 6; }; printf '%s\n' "$s" > "$f.sha256"`
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

func (c *Client) upload(ctx context.Context, local, dir, tmp string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	sc, err := sftp.NewClient(c.ssh, sftp.UseConcurrentWrites(true))
	if err != nil {
		// No sftp subsystem: stream it through cat.
		return c.uploadCat(ctx, f, dir, tmp)
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()
	if err := sc.MkdirAll(dir); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
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

func (c *Client) uploadCat(ctx context.Context, f io.Reader, dir, tmp string) error {
	s, err := c.Start(ctx, "umask 077 && mkdir -p "+ShellQuote(dir)+" && cat > "+ShellQuote(tmp))
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
