package extract

// The receiving side's policy: what a receiver allows its sender to ask
// for (Policy, Grant), decided by the receiving side, never by the
// sender.

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bulkmove/bulkmove/wire"
)

// Policy is what a receiver allows its sender to ask for: the receiving
// side's own choice (its command line: serve's --allow-* flags, a pull's
// own flags, the flags an agent was started with), never the sender's.
// The receive options of a sender's Hello are requests, granted within
// the policy (Grant). The zero Policy allows none of them: data, names,
// modes without setuid/setgid bits and times, owned by the receiving user.
type Policy struct {
	// Owner: entries may take the sender's numeric owners; only where this
	// process can give files away (root, or CAP_CHOWN), else they belong
	// to the receiving user whatever the policy says.
	Owner bool
	// Setid: setuid and setgid bits may be kept, and file capabilities
	// (security.capability, with Xattrs and as root): the privileges a
	// file grants whoever runs it.
	Setid bool
	// Xattrs: extended attributes may be applied: user.*, and where the
	// receiver runs as root trusted.* and security.*.
	Xattrs bool
	// ACLs: POSIX ACLs may be applied (system.posix_acl_access, and
	// system.posix_acl_default on directories).
	ACLs bool
	// Devices: character and block devices may be made (-D); only where
	// this process may (root, or CAP_MKNOD), else each fails, naming it.
	// FIFOs and sockets any receiver makes when asked: they grant nothing.
	Devices bool
	// AbsBackupDir is the absolute --backup-dir a sender may ask for: ""
	// none, only a relative one, beneath DEST (serve's, as an rsync
	// daemon keeps backups within its module); AnyBackupDir any the
	// receiving user may write (an agent, whose sender logged in as that
	// user; a local copy); else that directory alone (a pull: the
	// puller's own --backup-dir, whatever the remote sender asks).
	AbsBackupDir string
	// FakeSuper: this side's own --fake-super (a pull's): entries are
	// received as FakeSuper whatever the sender asks. A sender may ask
	// for it too: it only takes privileges away.
	FakeSuper bool
	// Hint, if set, names the way to allow one of the options ("setid",
	// "xattrs", "acls", "devices") on this receiver, for its refusals:
	// "serve --allow-setid".
	Hint func(option string) string
}

// AllowAll is the policy of a receiver whose sender is its own user's
// trusted command line (a local copy): whatever it asks for.
var AllowAll = Policy{Owner: true, Setid: true, Xattrs: true, ACLs: true, Devices: true, AbsBackupDir: AnyBackupDir}

// AnyBackupDir is Policy.AbsBackupDir allowing any absolute backup
// directory.
const AnyBackupDir = "*"

// allowsBackupDir reports whether p allows the backup directory dir.
func (p Policy) allowsBackupDir(dir string) bool {
	if dir == "" || !filepath.IsAbs(dir) {
		return true // beneath DEST (checked when it opens: Options.valid)
	}
	return p.AbsBackupDir == AnyBackupDir || p.AbsBackupDir != "" && filepath.Clean(p.AbsBackupDir) == filepath.Clean(dir)
}

// PolicyError is a request the policy refuses: the job is refused at its
// handshake with this reason, before anything is written.
type PolicyError struct {
	Asked []string // what the sender asked for and the policy refuses, as flags: "--keep-setid"
	Hints []string // how each could be allowed here, if known
}

func (e *PolicyError) Error() string {
	s := fmt.Sprintf("the sender asks for %s, which this receiver does not allow", strings.Join(e.Asked, ", "))
	if len(e.Hints) > 0 {
		s += " (" + strings.Join(e.Hints, ", ") + ")"
	}
	return s
}

// Grant returns the options a receiver applies for the request o: what o
// asks for, within p. Setuid/setgid bits, extended attributes, ACLs and
// devices asked for and not allowed refuse the job (a *PolicyError): a copy
// without them is not the copy asked for, and a refusal cannot be missed
// as a warning can. Owners not allowed are not kept, the job goes on
// (every sender asks for them, to be kept where the receiver can), and
// denied then names "owner" if this receiver could have kept them, for
// the sender to warn.
func (p Policy) Grant(o *wire.ReceiveOptions) (opt Options, denied []string, err error) {
	if o == nil {
		return Options{}, nil, nil
	}
	if p.FakeSuper && !o.FakeSuper {
		fake := *o
		fake.FakeSuper = true
		o = &fake
	}
	opt = FromWire(o)
	var pe PolicyError
	refuse := func(flag, option string) {
		pe.Asked = append(pe.Asked, flag)
		if p.Hint != nil {
			pe.Hints = append(pe.Hints, p.Hint(option))
		}
	}
	// Under FakeSuper setuid bits and devices are only recorded (the
	// files made are the receiving user's, without them): nothing to
	// allow.
	if o.KeepSetid && !p.Setid && !o.FakeSuper {
		refuse("--keep-setid", "setid")
	}
	if o.Xattrs && !p.Xattrs {
		refuse("-X (extended attributes)", "xattrs")
	}
	if o.ACLs && !p.ACLs {
		refuse("-A (ACLs)", "acls")
	}
	if o.Devices && !p.Devices && !o.FakeSuper {
		refuse("-D (devices)", "devices")
	}
	if o.Backup && !p.allowsBackupDir(o.BackupDir) {
		pe.Asked = append(pe.Asked, "--backup-dir "+o.BackupDir+" (an absolute backup directory)")
		pe.Hints = append(pe.Hints, "a relative --backup-dir is beneath DEST")
	}
	if len(pe.Asked) > 0 {
		return Options{}, nil, &pe
	}
	if opt.Owner && !p.Owner && !opt.FakeSuper {
		opt.Owner = false
		denied = append(denied, "owner")
	}
	return opt, denied, nil
}

// canChown reports whether this process may give files away: root, or
// rather CAP_CHOWN in its effective set: a root whose capabilities were
// dropped cannot, a service given the capability alone can.
var canChown = hasCap(capChown)

// canMknod reports whether this process may make devices: CAP_MKNOD, as
// canChown.
var canMknod = hasCap(capMknod)
