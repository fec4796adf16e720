package agentbin

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/bulkmove/bulkmove/internal/shell"
)

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

// fixCache makes the cache's missing directories (0700) and repairs those
// that others could write to (cs, from checkCache); then, in the same
// command, it hashes the cached binary again (it may have changed while
// others could write there) and records it if it is the one. It reports
// whether it did.
func fixCache(ctx context.Context, r Remote, cs cacheState, home, ver, sum string) (recorded bool, err error) {
	for _, why := range cs.repair {
		r.Warn(fmt.Sprintf("ssh %s: %s: made it 0700; the cached bulkmove in it is checked afresh", r.Host(), why))
	}
	var fix strings.Builder
	fix.WriteString(cacheShell)
	for _, d := range cs.missing {
		// Another push may make it at the same time: what it made is
		// checked below like the rest.
		fmt.Fprintf(&fix, "mkdir -m 0700 %[1]s 2>/dev/null || [ -d %[1]s ] || exit 3; ", shell.Quote(d))
	}
	for _, d := range cs.repairDirs {
		fmt.Fprintf(&fix, "chmod 0700 %s || exit 3; ", shell.Quote(d))
	}
	fix.WriteString(cacheReport(ver))
	fmt.Fprintf(&fix, `if [ "$dirsok" = 1 ] && sok "$c" f; then s1=$(st "$c"); s=$(h "$c"); s2=$(st "$c"); `+
		`if [ -n "$s1" ] && [ "$s1" = "$s2" ] && [ "$s" = %s ]; then printf '%%s|%%s\n' "$s" "$s1" > "$c%s" && printf 'recorded=1\n'; fi; fi`,
		shell.Quote(sum), RecordSuffix)
	out, err := r.Output(ctx, "sh -c "+shell.Quote(fix.String()))
	if err != nil {
		return false, fmt.Errorf("ssh %s: making the agent cache %s: %w", r.Host(), path.Join(home, CacheDir, ver), err)
	}
	kv := parseKV(out)
	cs = checkCache(kv, home, ver, sum)
	switch {
	case cs.refuse != "":
		return false, unsafeCache(r, cs.refuse)
	case len(cs.missing) > 0 || len(cs.repair) > 0:
		return false, unsafeCache(r, fmt.Sprintf("%s is still not safe after mkdir and chmod", path.Join(home, CacheDir, ver)))
	}
	return cs.good && kv["recorded"] == "1", nil
}

func unsafeCache(r Remote, why string) error {
	return &kindError{kind: ErrUnsafeCache, msg: fmt.Sprintf("ssh %s: %s: refusing to run or keep bulkmove there; "+
		"make it a directory of yours that only you can write to, or pass --remote-bulkmove", r.Host(), why)}
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
// lines, as okd and Command do, to name what is wrong.
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
