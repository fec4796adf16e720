package sshx

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    Target
		ok      bool
		wantErr string
	}{
		{in: "box2:/data", want: Target{Host: "box2", Path: "/data"}, ok: true},
		{in: "root@box2:/data", want: Target{User: "root", Host: "box2", Path: "/data"}, ok: true},
		{in: "box2:", want: Target{Host: "box2"}, ok: true},
		{in: "box2:rel/dir", want: Target{Host: "box2", Path: "rel/dir"}, ok: true},
		{in: "box2:a:b", want: Target{Host: "box2", Path: "a:b"}, ok: true},
		{in: "[::1]:/data", want: Target{Host: "::1", Path: "/data"}, ok: true},
		{in: "u@[fe80::1%eth0]:x", want: Target{User: "u", Host: "fe80::1%eth0", Path: "x"}, ok: true},
		{in: "a@b@host:/p", want: Target{User: "a@b", Host: "host", Path: "/p"}, ok: true},
		{in: "box2.example.com:/a b", want: Target{Host: "box2.example.com", Path: "/a b"}, ok: true},
		{in: "/data", ok: false},
		{in: "data", ok: false},
		{in: "./a:b", ok: false},
		{in: "/x:y", ok: false},
		{in: "dir/file:x", ok: false},
		{in: ":x", ok: false},
		{in: "", ok: false},
		{in: "@host:/p", ok: true, wantErr: "empty user"},
		{in: "user@:/p", ok: true, wantErr: "empty host"},
		{in: "[::1:/p", ok: false}, // the colon is inside the bracket: no host separator
		{in: "[::1]x:/p", ok: true, wantErr: "want [address]:path"},
		{in: "a[b]:/p", ok: true, wantErr: "want [address]:path"},
		{in: "-oProxyCommand=x:/p", ok: true, wantErr: "invalid host"},
	}
	for _, tt := range tests {
		got, ok, err := ParseTarget(tt.in)
		if ok != tt.ok {
			t.Errorf("ParseTarget(%q): ok = %v, want %v", tt.in, ok, tt.ok)
			continue
		}
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTarget(%q): err = %v, want it to mention %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTarget(%q): unexpected error %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseTarget(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if s := (Target{User: "u", Host: "::1", Path: "/p"}).String(); s != "u@[::1]:/p" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseJump(t *testing.T) {
	tests := []struct {
		in         string
		user, host string
		port       int
	}{
		{"bastion", "", "bastion", 0},
		{"me@bastion:2222", "me", "bastion", 2222},
		{"ssh://me@bastion:2200", "me", "bastion", 2200},
		{"[::1]:22", "", "::1", 22},
		{"[::1]", "", "::1", 0},
		{"::1", "", "::1", 0},
	}
	for _, tt := range tests {
		u, h, p, err := parseJump(tt.in)
		if err != nil || u != tt.user || h != tt.host || p != tt.port {
			t.Errorf("parseJump(%q) = %q %q %d %v", tt.in, u, h, p, err)
		}
	}
	if _, _, _, err := parseJump("host:0"); err == nil {
		t.Error("parseJump(host:0): no error")
	}
}

func TestWildMatch(t *testing.T) {
	for _, tt := range []struct {
		p, s string
		want bool
	}{
		{"*", "anything", true},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "example.com", false},
		{"box?", "box2", true},
		{"box?", "box22", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"192.168.0.?", "192.168.0.7", true},
	} {
		if got := wildMatch(tt.p, tt.s); got != tt.want {
			t.Errorf("wildMatch(%q, %q) = %v", tt.p, tt.s, got)
		}
	}
	if !matchList("a*,!ab", "ac") || matchList("a*,!ab", "ab") || matchList("x,y", "z") {
		t.Error("matchList")
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`a b  c`:                 {"a", "b", "c"},
		`"a b" c`:                {"a b", "c"},
		`'a "b"' c # comment`:    {`a "b"`, "c"},
		`"/path/with space/key"`: {"/path/with space/key"},
		`a\ b`:                   {"a b"},
		``:                       nil,
	} {
		got, err := splitArgs(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := splitArgs(`"open`); err == nil {
		t.Error("unterminated quote: no error")
	}
	kw, rest := splitKeyword("HostName=box")
	if kw != "HostName" || rest != "box" {
		t.Errorf("splitKeyword: %q %q", kw, rest)
	}
	kw, rest = splitKeyword("Port = 22")
	if kw != "Port" || rest != "22" {
		t.Errorf("splitKeyword: %q %q", kw, rest)
	}
}

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

func TestConfigResolve(t *testing.T) {
	dir := t.TempDir()
	home := os.Getenv("HOME")
	writeFile(t, filepath.Join(dir, "inc", "extra.conf"), `
Host box2
  ServerAliveCountMax 7
`)
	cfg := writeFile(t, filepath.Join(dir, "config"), `
# a comment
UnknownTopLevelKeyword whatever

Host box2 other
  HostName 10.1.2.3
  User alice
  IdentityFile ~/.ssh/box2_key
  IdentityFile %d/second_%h_%r
  FrobnicateTheWidget yes
  ProxyJump jump1,jump2

Match host 10.1.2.3 user alice
  Port 2222
  ConnectTimeout 7

Match exec "exit 0"
  Port 1
  User mallory

Match originalhost box2 !localuser nobody-at-all
  ServerAliveInterval 5

Match nosuchcriterion foo
  Port 3

Match all
  IdentitiesOnly yes

Include `+filepath.Join(dir, "inc", "*.conf")+`
Include does-not-exist/*

Host *.example.com !bad.example.com
  User wildcard

Host *
  User fallback
  Port 2200
  StrictHostKeyChecking accept-new
  UserKnownHostsFile ~/kh1 "/tmp/kh 2"
  HashKnownHosts yes
`)
	var warnings []string
	warn := func(s string) { warnings = append(warnings, s) }
	s, err := resolve("box2", "", 0, &Options{ConfigFile: cfg}, warn)
	if err != nil {
		t.Fatal(err)
	}
	if s.HostName != "10.1.2.3" || s.User != "alice" || s.Port != 2222 {
		t.Errorf("HostName/User/Port = %s %s %d", s.HostName, s.User, s.Port)
	}
	wantIDs := []string{filepath.Join(home, ".ssh/box2_key"), home + "/second_10.1.2.3_alice"}
	if !reflect.DeepEqual(s.IdentityFiles, wantIDs) {
		t.Errorf("IdentityFiles = %q, want %q", s.IdentityFiles, wantIDs)
	}
	if s.ProxyJump != "jump1,jump2" {
		t.Errorf("ProxyJump = %q", s.ProxyJump)
	}
	if s.ConnectTimeout != 7*time.Second || s.ServerAliveInterval != 5*time.Second || s.ServerAliveCountMax != 7 {
		t.Errorf("timeouts: %v %v %d", s.ConnectTimeout, s.ServerAliveInterval, s.ServerAliveCountMax)
	}
	if !s.IdentitiesOnly || !s.AcceptNew || !s.HashKnownHosts {
		t.Errorf("IdentitiesOnly %v AcceptNew %v HashKnownHosts %v", s.IdentitiesOnly, s.AcceptNew, s.HashKnownHosts)
	}
	if want := []string{home + "/kh1", "/tmp/kh 2"}; !reflect.DeepEqual(s.UserKnownHosts, want) {
		t.Errorf("UserKnownHosts = %q, want %q", s.UserKnownHosts, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "nosuchcriterion") {
		t.Errorf("warnings = %q, want one about the unknown Match criterion", warnings)
	}

	// Flags win over the config.
	s, err = resolve("box2", "bob", 0, &Options{ConfigFile: cfg, Port: 22, Jump: "none", Identities: []string{"/k"},
		ConnectTimeout: time.Second, KnownHostsFiles: []string{"/kh"}}, warn)
	if err != nil {
		t.Fatal(err)
	}
	if s.User != "bob" || s.Port != 22 || s.ProxyJump != "" || s.IdentityFiles[0] != "/k" ||
		s.ConnectTimeout != time.Second || !reflect.DeepEqual(s.UserKnownHosts, []string{"/kh"}) || s.GlobalKnownHosts != nil {
		t.Errorf("flags did not override: %+v", s)
	}

	// Patterns, negation, defaults.
	s, _ = resolve("www.example.com", "", 0, &Options{ConfigFile: cfg}, warn)
	if s.User != "wildcard" || s.HostName != "www.example.com" || s.Port != 2200 {
		t.Errorf("wildcard host: %s %s %d", s.User, s.HostName, s.Port)
	}
	s, _ = resolve("bad.example.com", "", 0, &Options{ConfigFile: cfg}, warn)
	if s.User != "fallback" {
		t.Errorf("negated pattern: User = %s", s.User)
	}
	if s.ServerAliveInterval != DefaultServerAliveInterval || s.ConnectTimeout != DefaultConnectTimeout {
		t.Errorf("defaults: %v %v", s.ServerAliveInterval, s.ConnectTimeout)
	}

	// A -F file that does not exist is an error; "none" reads nothing.
	if _, err := resolve("x", "", 0, &Options{ConfigFile: filepath.Join(dir, "nope")}, warn); err == nil {
		t.Error("missing -F file: no error")
	}
	s, err = resolve("box2", "", 0, &Options{ConfigFile: "none"}, warn)
	if err != nil || s.HostName != "box2" || s.Port != 22 || s.User != localUserName() {
		t.Errorf("-F none: %+v %v", s, err)
	}
}

func TestConfigDefaultFileAndInclude(t *testing.T) {
	home := os.Getenv("HOME")
	writeFile(t, filepath.Join(home, ".ssh", "config.d", "a.conf"), "Host incl\n  HostName included.example\n")
	writeFile(t, filepath.Join(home, ".ssh", "config"), "Include config.d/*.conf\nHost x\n  ProxyCommand nc %h %p\n")
	defer os.Remove(filepath.Join(home, ".ssh", "config"))
	s, err := resolve("incl", "", 0, &Options{}, func(string) {})
	if err != nil || s.HostName != "included.example" {
		t.Fatalf("relative Include from ~/.ssh: %+v %v", s, err)
	}
	s, _ = resolve("x", "", 0, &Options{}, func(string) {})
	if s.ProxyCommand != "nc x 22" {
		t.Errorf("ProxyCommand = %q", s.ProxyCommand)
	}
}
