package sshx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileNamesRunNothing is the attacker of CVE-2023-51385's class: host
// and user names carrying shell code, given to Dial with an ssh_config whose
// ProxyCommand uses %h, %r and %n. Each is refused, with an error naming the
// name and the character, before the ProxyCommand could run.
func TestHostileNamesRunNothing(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "proxycommand-ran")
	cfg := writeFile(t, filepath.Join(dir, "config"),
		"Host *\n  ConnectTimeout 5\n  ProxyCommand echo %h %r %n >>"+ran+"; exit 1\n")
	pwned := filepath.Join(dir, "PWNED")
	for _, tt := range []struct {
		tg   Target
		want string // in the error
	}{
		{Target{Host: "x;touch${IFS}" + pwned + "1;:"}, `host name "x;touch${IFS}` + pwned + `1;:": ';' is not allowed`},
		{Target{Host: "box", User: "$(touch${IFS}" + pwned + "2)"}, `user name "$(touch${IFS}` + pwned + `2)": '(' is not allowed`},
		{Target{Host: "x`touch${IFS}" + pwned + "3`"}, "'`' is not allowed"},
		{Target{Host: "x|touch${IFS}" + pwned + "4;:"}, "'|' is not allowed"},
		{Target{Host: "x&touch${IFS}" + pwned + "5&:"}, "'&' is not allowed"},
		{Target{Host: "x\ntouch " + pwned + "6\n:"}, `'\n' is not allowed`},
		{Target{Host: "-oProxyCommand=touch${IFS}" + pwned + "7"}, "starts with '-'"},
		{Target{Host: "box", User: "-oProxyCommand=x"}, "starts with '-'"},
		{Target{Host: "box", User: "u;touch${IFS}" + pwned + "8;:"}, "';' is not allowed"},
	} {
		_, err := Dial(testCtx(t), tt.tg, Options{ConfigFile: cfg, Batch: true, Stderr: &syncBuffer{}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Dial(%+v) = %v, want an error containing %q", tt.tg, err, tt.want)
		}
	}
	// A hostile jump host (-J) is refused the same way.
	_, err := Dial(testCtx(t), Target{Host: "box"}, Options{ConfigFile: cfg, Jump: "a$(touch${IFS}" + pwned + "9)", Batch: true, Stderr: &syncBuffer{}})
	if err == nil || !strings.Contains(err.Error(), "'$' is not allowed") {
		t.Errorf("hostile -J: %v", err)
	}
	if m, _ := filepath.Glob(pwned + "*"); len(m) != 0 {
		t.Errorf("injected commands ran: %q exist", m)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("the ProxyCommand ran with a hostile name: %q", b)
	}
}

// TestProxyCommandTokensQuoted: names that ssh_config itself supplies
// (HostName, User: the configuration is trusted, as ssh(1) trusts it) and
// local values (the home directory) reach the ProxyCommand's shell as one
// word each, whatever characters they hold; ordinary names stay as they are.
func TestProxyCommandTokensQuoted(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "config"), `
Host evil
  HostName a;touch${IFS}PWNED
  User $(id)
  ProxyCommand nc %h %p %r %n %d
Host plain
  HostName 10.0.0.1
  User alice
  ProxyCommand ssh -W %h:%p bastion # %r %n
`)
	s, err := resolve("evil", "", 0, &Options{ConfigFile: cfg}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if want := "nc 'a;touch${IFS}PWNED' 22 '$(id)' evil " + ShellQuote(homeDir()); s.ProxyCommand != want {
		t.Errorf("ProxyCommand = %q, want %q", s.ProxyCommand, want)
	}
	s, err = resolve("plain", "", 0, &Options{ConfigFile: cfg}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ssh -W 10.0.0.1:22 bastion # alice plain"; s.ProxyCommand != want {
		t.Errorf("ProxyCommand = %q, want %q", s.ProxyCommand, want)
	}
}

func TestValidNames(t *testing.T) {
	for _, h := range []string{"box2", "box2.example.com", "10.0.0.1", "::1", "fe80::1%eth0", "host_1", "*weird?", "a~b"} {
		if err := checkHostName(h); err != nil {
			t.Errorf("checkHostName(%q) = %v", h, err)
		}
	}
	for _, h := range []string{"", "-x", "a b", "a\tb", "a'b", "a\"b", "a$b", "a\\b", "a;b", "a&b", "a<b", "a>b",
		"a|b", "a(b", "a)b", "a{b", "a}b", "a,b", "a`b", "a\x7fb", "a\x00b"} {
		if err := checkHostName(h); err == nil {
			t.Errorf("checkHostName(%q) accepted", h)
		}
	}
	for _, u := range []string{"root", "alice.smith", "DOMAIN\\user", "a@b", "machine$", "first last"} {
		if err := checkUserName(u); err != nil {
			t.Errorf("checkUserName(%q) = %v", u, err)
		}
	}
	for _, u := range []string{"-l", "a -b", "a'b", "a\"b", "a`b", "a;b", "a&b", "a<b", "a>b", "a|b", "a(b", "a)b",
		"a{b", "a}b", "a\\", "a\nb", "a\x1bb"} {
		if err := checkUserName(u); err == nil {
			t.Errorf("checkUserName(%q) accepted", u)
		}
	}
}
