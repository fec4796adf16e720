package idmap

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Names is one side's name service for a job: user and group names and
// ids, each looked up once. Where getent is installed it is asked, so that
// what NSS knows (LDAP, SSSD, NIS) is found as the C library would find
// it; without it, /etc/passwd and /etc/group are read (all a static
// binary's os/user reads).
type Names struct {
	getent        string // getent's path, "" to read the files
	passwd, group string // the files read without getent

	mu     sync.Mutex
	byID   map[key]string // "" for none
	byName map[nkey]idOK
}

type key struct {
	group bool
	id    uint32
}

type nkey struct {
	group bool
	name  string
}

type idOK struct {
	id uint32
	ok bool
}

// NewNames returns an empty cache over this host's name service.
func NewNames() *Names {
	n := &Names{passwd: "/etc/passwd", group: "/etc/group", byID: map[key]string{}, byName: map[nkey]idOK{}}
	n.getent, _ = exec.LookPath("getent")
	return n
}

// User returns uid's name, "" if it has none.
func (n *Names) User(uid uint32) string { return n.name(false, uid) }

// Group returns gid's name, "" if it has none.
func (n *Names) Group(gid uint32) string { return n.name(true, gid) }

// UID returns the user named name's id.
func (n *Names) UID(name string) (uint32, bool) { return n.id(false, name) }

// GID returns the group named name's id.
func (n *Names) GID(name string) (uint32, bool) { return n.id(true, name) }

func (n *Names) name(group bool, id uint32) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := key{group, id}
	if s, ok := n.byID[k]; ok {
		return s
	}
	var s string
	want := strconv.FormatUint(uint64(id), 10)
	if f := n.lookup(group, want, 2); f != nil && f[2] == want {
		s = f[0]
	}
	n.byID[k] = s
	return s
}

func (n *Names) id(group bool, name string) (uint32, bool) {
	if name == "" || checkName(name) != nil {
		return 0, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	k := nkey{group, name}
	if r, ok := n.byName[k]; ok {
		return r.id, r.ok
	}
	var r idOK
	// The entry's own name must be the one asked: getent takes a key of
	// digits for an id.
	if f := n.lookup(group, name, 0); f != nil && f[0] == name {
		if id, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			r = idOK{uint32(id), true}
		}
	}
	n.byName[k] = r
	return r.id, r.ok
}

// lookup returns the fields of the passwd or group entry whose field
// field (0 its name, 2 its id) is k, nil if there is none.
func (n *Names) lookup(group bool, k string, field int) []string {
	db, file := "passwd", n.passwd
	if group {
		db, file = "group", n.group
	}
	if n.getent != "" {
		// "--": a key that starts with '-' is a key, not an option.
		out, err := exec.Command(n.getent, db, "--", k).Output()
		if err != nil {
			return nil // exit 2: no such entry
		}
		line, _, _ := strings.Cut(string(out), "\n")
		return fields(line)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fl := fields(sc.Text()); fl != nil && fl[field] == k {
			return fl
		}
	}
	return nil
}

// fields splits an entry of passwd or group (name:x:id:...), nil if it is
// not one.
func fields(line string) []string {
	f := strings.Split(line, ":")
	if len(f) < 3 || f[0] == "" || strings.HasPrefix(f[0], "#") {
		return nil
	}
	if _, err := strconv.ParseUint(f[2], 10, 32); err != nil {
		return nil
	}
	return f
}
