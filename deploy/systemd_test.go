package deploy_test

// systemd/: the unit checked by systemd-analyze (verify, and security at
// 4.0 or better), and run as systemd would run it, which this machine's
// systemd, not being PID 1, cannot: its Environment= and EnvironmentFile=
// read, its specifiers and variables expanded, its ExecStart started as its
// User= with its capabilities (setpriv), and pushed to.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkmove/bulkmove/internal/gentree"
	"github.com/bulkmove/bulkmove/internal/testbin"
	"github.com/bulkmove/bulkmove/internal/treecmp"
)

const (
	unitFile     = "systemd/bulkmove-serve@.service"
	defaultsFile = "systemd/bulkmove-serve.default"
	sysusersFile = "systemd/bulkmove.sysusers"
)

// needTools skips the test without the commands named, or fails it under CI.
func needTools(t *testing.T, root bool, cmds ...string) {
	t.Helper()
	var missing []string
	if root && os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("needs %s", strings.Join(missing, ", "))
	}
	t.Skipf("needs %s", strings.Join(missing, ", "))
}

// unit is a unit file's settings: section → key → values, in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, file string) unit {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	var cont string
	for _, line := range strings.Split(string(b), "\n") {
		if cont != "" {
			line = cont + " " + strings.TrimSpace(line)
			cont = ""
		}
		s := strings.TrimSpace(line)
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		if strings.HasSuffix(s, "\\") {
			cont = strings.TrimSuffix(s, "\\")
			continue
		}
		if s[0] == '[' {
			section = strings.Trim(s, "[]")
			u[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("%s: %q is no KEY=VALUE", file, s)
		}
		u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return u
}

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	v := u["Service"][key]
	if len(v) != 1 {
		t.Fatalf("%s: [Service] %s: %d values, want 1", unitFile, key, len(v))
	}
	return v[0]
}

// words splits a command line or an Environment= value as systemd does:
// at blanks, with '...' and "..." quoting and \ escaping the next byte.
func words(s string) []string {
	var out []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"') && !in:
			quote, in = c, true
		case c == '\\' && i+1 < len(s) && quote != '\'':
			i++
			w.WriteByte(s[i])
			in = true
		case quote == 0 && (c == ' ' || c == '\t'):
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

// envFile reads KEY=VALUE lines, as EnvironmentFile= does.
func envFile(t *testing.T, file string, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is no KEY=VALUE", file, l)
		}
		if w := words(v); len(w) == 1 {
			v = w[0]
		} else {
			v = strings.TrimSpace(v)
		}
		env[strings.TrimSpace(k)] = v
	}
}

var envRef = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expandExec expands ExecStart's words as systemd does: a word that is
// $VAR alone becomes the value's words, ${VAR} is replaced anywhere, $$
// is $.
func expandExec(ws []string, env map[string]string) []string {
	var out []string
	for _, w := range ws {
		if m := regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`).FindStringSubmatch(w); m != nil {
			out = append(out, strings.Fields(env[m[1]])...)
			continue
		}
		out = append(out, envRef.ReplaceAllStringFunc(w, func(m string) string {
			if m == "$$" {
				return "$"
			}
			if strings.HasPrefix(m, "${") {
				return env[m[2:len(m)-1]]
			}
			return m // $VAR inside a word is left as it is
		}))
	}
	return out
}

// escapePath is systemd-escape --path.
func escapePath(p string) string {
	p = strings.Trim(filepath.Clean(p), "/")
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c == '.' && i == 0, !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '_' || c == '.'):
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// specifiers expands the specifiers the unit uses for an instance whose
// data directory is dir.
func specifiers(s, dir string) string {
	r := strings.NewReplacer("%%", "%", "%i", escapePath(dir), "%I", strings.TrimPrefix(dir, "/"), "%f", dir)
	return r.Replace(s)
}

// TestSystemdAnalyze: systemd-analyze verify finds nothing to say about an
// instance of the unit, and security rates it 4.0 or better.
func TestSystemdAnalyze(t *testing.T) {
	needTools(t, false, "systemd-analyze")
	dir := t.TempDir()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, filepath.Base(unitFile)), b, 0o644)
	inst := filepath.Join(dir, "bulkmove-serve@srv-bulkmove.service")
	out, err := exec.Command("systemd-analyze", "verify", inst).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=true", inst).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if score, _ := strconv.ParseFloat(string(m[1]), 64); score > 4.0 {
		t.Errorf("systemd-analyze security rates %s %.1f, want 4.0 or better:\n%s", unitFile, score, out)
	}
}

// serviceUser makes the unit's User= as its sysusers file says, if the
// system has no such user, and removes it when the test ends.
func serviceUser(t *testing.T, name string) *user.User {
	t.Helper()
	if u, err := user.Lookup(name); err == nil {
		return u
	}
	b, err := os.ReadFile(sysusersFile)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^u\s+` + name + `\s`).Match(b) {
		t.Fatalf("%s makes no user %s, the unit's User=", sysusersFile, name)
	}
	if out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// selfSignedFiles writes a certificate for 127.0.0.1 and its key.
func selfSignedFiles(t *testing.T, crt, key string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "bulkmove test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(k)
	os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o640)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o640)
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// TestSystemdServe runs the unit's ExecStart as systemd would, without and
// with certificate files, and pushes a tree to it: as the unit's user,
// with its capabilities, it keeps the senders' owners; its metrics port
// takes no write.
func TestSystemdServe(t *testing.T) {
	needTools(t, true, "setpriv", "sh", "useradd")
	u := readUnit(t, unitFile)
	name := u.one(t, "User")
	usr := serviceUser(t, name)
	uid, _ := strconv.Atoi(usr.Uid)
	gid, _ := strconv.Atoi(usr.Gid)
	bin := testbin.Build(t)

	// Where the unit's files are here: /etc/bulkmove, /etc/default, the
	// binary, the data directory (the instance).
	etc, defaults := t.TempDir(), t.TempDir()
	data := filepath.Join(t.TempDir(), "srv", "bulkmove")
	for _, d := range []string{filepath.Dir(etc), filepath.Dir(filepath.Dir(data)), filepath.Dir(data)} {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755)
	}
	// As the unit's comment installs them.
	os.Chmod(etc, 0o750)
	os.Chown(etc, 0, gid)
	os.Chmod(defaults, 0o755)
	os.Mkdir(data, 0o755)
	os.Chown(data, uid, gid)
	token := "9c1f6e0b7d2a48e3b5f14a6c8d0e2b7f93a5c1d4e6f80b2a"
	os.WriteFile(filepath.Join(etc, "token"), []byte(token+"\n"), 0o640)
	os.Chown(filepath.Join(etc, "token"), 0, gid)
	b, err := os.ReadFile(defaultsFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(defaults, "bulkmove-serve"), b, 0o644)
	// This instance's own settings, as a second instance would have: free
	// ports on the hosts the shipped settings name.
	shipped := map[string]string{}
	envFile(t, defaultsFile, shipped)
	host := func(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	listen := net.JoinHostPort(host(shipped["LISTEN"]), strconv.Itoa(freePort(t)))
	metricsAddr := net.JoinHostPort(host(shipped["METRICS_ADDR"]), strconv.Itoa(freePort(t)))
	if h := host(metricsAddr); h != "127.0.0.1" && h != "::1" && h != "localhost" {
		t.Errorf("%s: METRICS_ADDR %s is not loopback: a scraper on this host needs no more", defaultsFile, shipped["METRICS_ADDR"])
	}
	os.WriteFile(filepath.Join(defaults, "bulkmove-serve@"+escapePath(data)), []byte("LISTEN="+listen+"\nMETRICS_ADDR="+metricsAddr+"\n"), 0o644)

	paths := strings.NewReplacer("/usr/local/bin/bulkmove", bin, "/etc/bulkmove/", etc+"/", "/etc/default/", defaults+"/")
	env := map[string]string{}
	for _, e := range u["Service"]["Environment"] {
		for _, w := range words(e) {
			k, v, _ := strings.Cut(w, "=")
			env[k] = v
		}
	}
	for _, f := range u["Service"]["EnvironmentFile"] {
		f, optional := strings.CutPrefix(f, "-")
		f = paths.Replace(specifiers(f, data))
		if _, err := os.Stat(f); err != nil && optional {
			continue
		}
		envFile(t, f, env)
	}
	if got, want := u.one(t, "ReadWritePaths"), "%f"; got != want {
		t.Errorf("ReadWritePaths=%s, want %s: the data directory is the instance's, in one place", got, want)
	}
	var argv []string
	for _, w := range expandExec(words(u.one(t, "ExecStart")), env) {
		argv = append(argv, paths.Replace(specifiers(w, data)))
	}
	caps := func(key string) string {
		var c []string
		for _, n := range strings.Fields(u.one(t, key)) {
			c = append(c, "+"+strings.ToLower(strings.TrimPrefix(n, "CAP_")))
		}
		return strings.Join(c, ",")
	}
	amb := caps("AmbientCapabilities")
	setpriv := []string{"--reuid=" + usr.Uid, "--regid=" + usr.Gid, "--init-groups", "--inh-caps=" + amb, "--ambient-caps=" + amb,
		"--bounding-set=-all," + caps("CapabilityBoundingSet")}
	if u.one(t, "NoNewPrivileges") == "true" {
		setpriv = append(setpriv, "--no-new-privs")
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	environ = append(environ, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME="+usr.HomeDir, "USER="+name, "LOGNAME="+name)

	start := func(t *testing.T) (*exec.Cmd, *syncBuffer, string) {
		t.Helper()
		cmd := exec.Command("setpriv", append(append(setpriv, "--"), argv...)...)
		cmd.Env = environ
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		done := startDaemon(t, cmd)
		re := regexp.MustCompile(`certificate SHA-256 ([0-9a-f]{64})`)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if m := re.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "metrics on") {
				return cmd, out, m[1]
			}
			select {
			case <-done:
				t.Fatalf("the unit's ExecStart exited (%v):\n%s\n%s", cmd.ProcessState, strings.Join(argv, " "), out)
			default:
			}
		}
		t.Fatalf("the unit's ExecStart did not say it listens in 30 s:\n%s", out)
		return nil, nil, ""
	}

	src := t.TempDir()
	if err := gentree.Mixed(src, 200, 3); err != nil {
		t.Fatal(err)
	}
	n := 0
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && n%3 == 0 {
			os.Lchown(p, 3000+n%4, 4000+n%3)
		}
		n++
		return nil
	})
	senderToken := filepath.Join(t.TempDir(), "token")
	os.WriteFile(senderToken, []byte(token+"\n"), 0o600)
	push := func(t *testing.T, pin []string, dest string) {
		t.Helper()
		args := append([]string{"--token-file", senderToken, "--progress=none"}, pin...)
		cmd := exec.Command(bin, append(args, src, fmt.Sprintf("bulkmove://127.0.0.1:%s/data/%s", port(listen), dest))...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("push to the unit's serve: %v\n%s", err, out)
		}
		treecmp.Equal(t, src, filepath.Join(data, dest), treecmp.Options{Owner: true})
	}
	checkServe := func(t *testing.T, cmd *exec.Cmd) {
		t.Helper()
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if !regexp.MustCompile(`(?m)^Uid:\s+` + usr.Uid + `\s`).Match(st) {
			t.Errorf("serve does not run as %s:\n%s", name, st)
		}
		for _, tok := range []string{"", wrongToken, token} {
			req, _ := http.NewRequest(http.MethodPut, "http://"+metricsAddr+"/bwlimit", strings.NewReader("1"))
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("serve's metrics port: PUT /bwlimit: %d, want 404 (serve has no control endpoint)", resp.StatusCode)
			}
		}
	}

	t.Run("without certificate", func(t *testing.T) {
		cmd, _, fp := start(t)
		checkServe(t, cmd)
		push(t, []string{"--fingerprint", fp}, "throwaway")
	})
	t.Run("with certificate", func(t *testing.T) {
		crt, key := filepath.Join(etc, "tls.crt"), filepath.Join(etc, "tls.key")
		want := selfSignedFiles(t, crt, key)
		os.Chown(crt, 0, gid)
		os.Chown(key, 0, gid)
		cmd, _, fp := start(t)
		if fp != want {
			t.Errorf("serve's certificate has SHA-256 %s, not that of %s (%s)", fp, crt, want)
		}
		checkServe(t, cmd)
		push(t, []string{"--ca", crt}, "verified")
	})
}

// wrongToken has the form of a real one.
const wrongToken = "5f0c2b8e9d41a7763e12c9b0f4a8d6e1c3b7a9f2e5d8c1b4"
