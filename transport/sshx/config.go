package sshx

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A small, tolerant reader of ssh_config(5). It evaluates the files for one
// destination the way ssh does (first value wins, IdentityFile accumulates,
// Host and Match blocks, Include), and never fails on what it does not know.
// (github.com/kevinburke/ssh_config rejects Match exec and other criteria
// with an error, and matches Match host against the alias.)

// Where OpenSSH's system-wide files are; variables so tests can disable them.
var (
	systemConfigFile        = "/etc/ssh/ssh_config"
	defaultGlobalKnownHosts = []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
)

const maxIncludeDepth = 16

// settings is what applies to one destination (or jump host) after the
// command line options and ssh_config are combined.
type settings struct {
	Alias         string // as typed
	HostName      string
	User          string
	Port          int
	PortFromFlags bool // the port came from the target or Options (for hints)

	IdentityFiles    []string // expanded, -i first
	IdentitiesGiven  bool     // -i or IdentityFile present: no default identities
	CertificateFiles []string
	IdentitiesOnly   bool
	IdentityAgent    string // "" = $SSH_AUTH_SOCK; "none" = no agent

	ProxyJump    string // "" or "none": direct
	ProxyCommand string

	UserKnownHosts   []string // the first is written to
	GlobalKnownHosts []string
	HostKeyAlias     string
	HashKnownHosts   bool
	AcceptNew        bool // record unknown host keys
	Batch            bool

	ConnectTimeout      time.Duration
	ServerAliveInterval time.Duration
	ServerAliveCountMax int

	ConfigFile string // -F, to repeat in hints
}

// configValues is the raw result of reading the config files.
type configValues struct {
	first     map[string][]string // keyword (lower case) -> args of its first occurrence
	rawFirst  map[string]string   // keyword -> unsplit rest of line (ProxyCommand)
	multi     map[string][]string // IdentityFile, CertificateFile: every occurrence
	proxySeen bool                // ProxyJump or ProxyCommand already set
}

func (v *configValues) get(kw string) (string, bool) {
	a, ok := v.first[kw]
	if !ok || len(a) == 0 {
		return "", false
	}
	return a[0], true
}

type configReader struct {
	alias     string
	cmdUser   string
	localUser string
	home      string
	system    bool
	v         *configValues
	warn      func(string)
}

func newConfigValues() *configValues {
	return &configValues{first: map[string][]string{}, rawFirst: map[string]string{}, multi: map[string][]string{}}
}

// readFile reads one config file. A missing file is an error only if
// mustExist.
func (r *configReader) readFile(path string, mustExist bool, active bool, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("ssh config %s: Include nested too deeply", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if !mustExist && os.IsNotExist(err) {
			return nil
		}
		if !mustExist {
			r.warn(fmt.Sprintf("ssh config %s: %v (ignored)", path, err))
			return nil
		}
		return fmt.Errorf("ssh config: %w", err)
	}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		kw, rest := splitKeyword(line)
		args, err := splitArgs(rest)
		where := fmt.Sprintf("%s:%d", path, n+1)
		if err != nil {
			r.warn(fmt.Sprintf("ssh config %s: %v (line ignored)", where, err))
			continue
		}
		switch strings.ToLower(kw) {
		case "host":
			active = r.matchHost(args)
		case "match":
			active = r.matchBlock(args, where)
		case "include":
			if !active {
				continue
			}
			for _, a := range args {
				p := expandTilde(a, r.home)
				if !filepath.IsAbs(p) {
					if r.system {
						p = filepath.Join("/etc/ssh", p)
					} else {
						p = filepath.Join(r.home, ".ssh", p)
					}
				}
				matches, _ := filepath.Glob(p)
				sort.Strings(matches)
				for _, m := range matches {
					if err := r.readFile(m, false, true, depth+1); err != nil {
						return err
					}
				}
			}
		default:
			if active {
				r.set(strings.ToLower(kw), args, rest)
			}
		}
	}
	return nil
}

func (r *configReader) set(kw string, args []string, rest string) {
	v := r.v
	switch kw {
	case "identityfile", "certificatefile":
		if len(args) > 0 {
			v.multi[kw] = append(v.multi[kw], args[0])
		}
	case "proxyjump", "proxycommand":
		if !v.proxySeen {
			v.proxySeen = true
			v.first[kw] = args
			v.rawFirst[kw] = rest
		}
	default:
		if _, ok := v.first[kw]; !ok {
			v.first[kw] = args
		}
	}
}

func (r *configReader) matchHost(patterns []string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if wildMatch(strings.ToLower(strings.TrimPrefix(p, "!")), strings.ToLower(r.alias)) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

func (r *configReader) currentHostName() string {
	if h, ok := r.v.get("hostname"); ok {
		return expandPercent(h, map[byte]string{'h': r.alias})
	}
	return r.alias
}

func (r *configReader) currentUser() string {
	if r.cmdUser != "" {
		return r.cmdUser
	}
	if u, ok := r.v.get("user"); ok {
		return u
	}
	return r.localUser
}

// matchBlock evaluates the criteria of a Match line. Criteria it cannot
// evaluate (exec, localnetwork, tagged, ...) make the block not apply.
func (r *configReader) matchBlock(args []string, where string) bool {
	if len(args) == 0 {
		r.warn(fmt.Sprintf("ssh config %s: Match without criteria (block ignored)", where))
		return false
	}
	result := true
	for i := 0; i < len(args); {
		c := strings.ToLower(args[i])
		i++
		neg := strings.HasPrefix(c, "!")
		c = strings.TrimPrefix(c, "!")
		var m bool
		switch c {
		case "all":
			m = true
		case "canonical":
			m = false // no hostname canonicalization here
		case "final":
			m = true // one pass, which is also the final one
		case "host", "originalhost", "user", "localuser":
			if i >= len(args) {
				r.warn(fmt.Sprintf("ssh config %s: Match %s without argument (block ignored)", where, c))
				return false
			}
			arg := args[i]
			i++
			switch c {
			case "host":
				m = matchList(arg, r.currentHostName())
			case "originalhost":
				m = matchList(arg, r.alias)
			case "user":
				m = matchList(arg, r.currentUser())
			case "localuser":
				m = matchList(arg, r.localUser)
			}
		case "exec", "tagged", "localnetwork", "address", "localaddress", "localport",
			"rdomain", "version", "sessiontype", "command":
			// Unsupported: the block does not apply (and no command runs).
			return false
		default:
			r.warn(fmt.Sprintf("ssh config %s: unknown Match criterion %q (block ignored)", where, c))
			return false
		}
		if neg {
			m = !m
		}
		if !m {
			result = false
		}
	}
	return result
}

// matchList matches s against a comma-separated pattern list with !negation
// (case-insensitively, as for host names).
func matchList(list, s string) bool {
	s = strings.ToLower(s)
	matched := false
	for _, p := range strings.Split(list, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		neg := strings.HasPrefix(p, "!")
		if wildMatch(strings.TrimPrefix(p, "!"), s) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// wildMatch matches s against a pattern with * and ? wildcards.
func wildMatch(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			if p == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if wildMatch(p, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			p, s = p[1:], s[1:]
		default:
			if s == "" || p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
	}
	return s == ""
}

// splitKeyword splits "Keyword value", "Keyword=value" or "Keyword = value".
func splitKeyword(line string) (kw, rest string) {
	i := strings.IndexAny(line, " \t=")
	if i < 0 {
		return line, ""
	}
	kw, rest = line[:i], strings.TrimLeft(line[i:], " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	return kw, rest
}

// splitArgs splits a value into words like OpenSSH's argv_split: whitespace
// separates, single and double quotes group, a backslash escapes a quote or
// backslash, and a word starting with # starts a comment.
func splitArgs(s string) ([]string, error) {
	var args []string
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '#' {
			break
		}
		var w strings.Builder
		var quote byte
		for ; i < len(s); i++ {
			c := s[i]
			if quote == 0 && (c == ' ' || c == '\t') {
				break
			}
			if c == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '"' || s[i+1] == '\'' || (quote == 0 && s[i+1] == ' ')) {
				w.WriteByte(s[i+1])
				i++
				continue
			}
			if quote == 0 && (c == '"' || c == '\'') {
				quote = c
				continue
			}
			if c == quote {
				quote = 0
				continue
			}
			w.WriteByte(c)
		}
		if quote != 0 {
			return nil, fmt.Errorf("unterminated quote")
		}
		args = append(args, w.String())
	}
	return args, nil
}

func expandTilde(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	if strings.HasPrefix(p, "~") {
		name, rest, _ := strings.Cut(p[1:], "/")
		if u, err := user.Lookup(name); err == nil {
			return filepath.Join(u.HomeDir, rest)
		}
	}
	return p
}

// expandPercent replaces %x tokens (and %% with %); unknown tokens stay.
func expandPercent(s string, tokens map[byte]string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
			continue
		}
		if v, ok := tokens[s[i]]; ok {
			b.WriteString(v)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(s[i])
	}
	return b.String()
}

func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return "/"
}

func localUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

func shortHostname() string {
	h, _ := os.Hostname()
	short, _, _ := strings.Cut(h, ".")
	return short
}

// resolve combines a destination (as typed, plus user and port from the
// command line) with ssh_config and Options.
func resolve(alias, cmdUser string, cmdPort int, o *Options, warn func(string)) (*settings, error) {
	if err := checkNames(alias, cmdUser); err != nil {
		return nil, err
	}
	home := homeDir()
	r := &configReader{alias: alias, cmdUser: cmdUser, localUser: localUserName(), home: home, v: newConfigValues(), warn: warn}
	switch {
	case o.ConfigFile == "none":
	case o.ConfigFile != "":
		if err := r.readFile(expandTilde(o.ConfigFile, home), true, true, 0); err != nil {
			return nil, err
		}
	default:
		if err := r.readFile(filepath.Join(home, ".ssh", "config"), false, true, 0); err != nil {
			return nil, err
		}
		if systemConfigFile != "" {
			r.system = true
			if err := r.readFile(systemConfigFile, false, true, 0); err != nil {
				return nil, err
			}
		}
	}
	v := r.v
	s := &settings{Alias: alias, ConfigFile: o.ConfigFile}

	s.HostName = r.currentHostName()
	s.User = r.currentUser()
	switch {
	case cmdPort > 0:
		s.Port, s.PortFromFlags = cmdPort, true
	case o.Port > 0:
		s.Port, s.PortFromFlags = o.Port, true
	default:
		s.Port = 22
		if p, ok := v.get("port"); ok {
			if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 65536 {
				s.Port = n
			} else {
				warn(fmt.Sprintf("ssh config: bad Port %q for %s (using 22)", p, alias))
			}
		}
	}
	tokens := map[byte]string{
		'd': home, 'u': r.localUser, 'l': shortHostname(), 'h': s.HostName, 'r': s.User,
		'p': strconv.Itoa(s.Port), 'n': alias, 'i': strconv.Itoa(os.Getuid()),
	}
	if h, err := os.Hostname(); err == nil {
		tokens['L'] = h
	}
	if a, ok := v.get("hostkeyalias"); ok {
		s.HostKeyAlias = a
		tokens['k'] = a
	} else {
		tokens['k'] = s.HostName
	}
	expand := func(p string) string { return expandTilde(expandPercent(p, tokens), home) }

	for _, p := range o.Identities {
		s.IdentityFiles = append(s.IdentityFiles, expand(p))
	}
	for _, p := range v.multi["identityfile"] {
		if strings.EqualFold(p, "none") {
			continue
		}
		s.IdentityFiles = append(s.IdentityFiles, expand(p))
	}
	s.IdentitiesGiven = len(o.Identities) > 0 || len(v.multi["identityfile"]) > 0
	for _, p := range v.multi["certificatefile"] {
		s.CertificateFiles = append(s.CertificateFiles, expand(p))
	}
	s.IdentitiesOnly = yes(v, "identitiesonly")
	if a, ok := v.get("identityagent"); ok {
		switch {
		case strings.EqualFold(a, "none"):
			s.IdentityAgent = "none"
		case a == "SSH_AUTH_SOCK":
		case strings.HasPrefix(a, "$"):
			s.IdentityAgent = os.Getenv(strings.Trim(a[1:], "{}"))
		default:
			s.IdentityAgent = expand(a)
		}
	}

	switch {
	case o.Jump != "":
		s.ProxyJump = o.Jump
	default:
		if j, ok := v.get("proxyjump"); ok {
			s.ProxyJump = j
		} else if c := v.rawFirst["proxycommand"]; c != "" && !strings.EqualFold(c, "none") {
			// Each token one word for the shell, whatever it holds: an
			// ordinary name is its own quoting.
			quoted := make(map[byte]string, len(tokens))
			for k, t := range tokens {
				quoted[k] = ShellQuote(t)
			}
			s.ProxyCommand = expandPercent(c, quoted)
		}
	}
	if strings.EqualFold(s.ProxyJump, "none") {
		s.ProxyJump = ""
	}

	if len(o.KnownHostsFiles) > 0 {
		s.UserKnownHosts = append([]string(nil), o.KnownHostsFiles...)
	} else {
		if a, ok := v.first["userknownhostsfile"]; ok && len(a) > 0 {
			for _, f := range a {
				if !strings.EqualFold(f, "none") {
					s.UserKnownHosts = append(s.UserKnownHosts, expand(f))
				}
			}
		} else {
			s.UserKnownHosts = []string{filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, ".ssh", "known_hosts2")}
		}
		if a, ok := v.first["globalknownhostsfile"]; ok && len(a) > 0 {
			for _, f := range a {
				if !strings.EqualFold(f, "none") {
					s.GlobalKnownHosts = append(s.GlobalKnownHosts, expand(f))
				}
			}
		} else {
			s.GlobalKnownHosts = append([]string(nil), defaultGlobalKnownHosts...)
		}
	}
	s.HashKnownHosts = yes(v, "hashknownhosts")
	shk, _ := v.get("stricthostkeychecking")
	switch strings.ToLower(shk) {
	case "accept-new", "no", "off":
		s.AcceptNew = true
	}
	if o.AcceptNewHostKey {
		s.AcceptNew = true
	}
	s.Batch = o.Batch || yes(v, "batchmode")

	s.ConnectTimeout = DefaultConnectTimeout
	if t, ok := v.get("connecttimeout"); ok {
		if n, err := strconv.Atoi(t); err == nil && n > 0 {
			s.ConnectTimeout = time.Duration(n) * time.Second
		}
	}
	if o.ConnectTimeout > 0 {
		s.ConnectTimeout = o.ConnectTimeout
	}
	s.ServerAliveInterval = DefaultServerAliveInterval
	if t, ok := v.get("serveraliveinterval"); ok {
		if n, err := strconv.Atoi(t); err == nil && n >= 0 {
			s.ServerAliveInterval = time.Duration(n) * time.Second
		}
	}
	s.ServerAliveCountMax = 3
	if t, ok := v.get("serveralivecountmax"); ok {
		if n, err := strconv.Atoi(t); err == nil && n > 0 {
			s.ServerAliveCountMax = n
		}
	}
	return s, nil
}

// DefaultServerAliveInterval is used when ssh_config sets no
// ServerAliveInterval (OpenSSH's default is off; a transfer that hangs on a
// dead link is worse). "ServerAliveInterval 0" turns keepalives off.
const DefaultServerAliveInterval = 30 * time.Second

func yes(v *configValues, kw string) bool {
	s, _ := v.get(kw)
	return strings.EqualFold(s, "yes") || strings.EqualFold(s, "true")
}
