package engine

import (
	"path/filepath"

	"github.com/bulkmove/bulkmove/internal/termsafe"
	"github.com/bulkmove/bulkmove/receive/extract"
	"github.com/bulkmove/bulkmove/send"
)

// A receiver's policy: what its sender may ask it to keep beyond data,
// names, modes and times (owners, setuid/setgid bits and file
// capabilities, extended attributes, ACLs, devices). The sender's Hello only
// requests them; the receiving side's own command line allows them:
//
//   - serve: --allow-owner, --allow-setid, --allow-xattrs, --allow-acls,
//     --allow-devices, all off by default;
//   - a pull: the puller's own flags (--keep-setid, -X, -A, -D, and
//     owners unless --no-owner), whatever the remote sender asks for;
//   - an agent: the same --allow-* flags, which the pushing bulkmove
//     derives from its own flags when it starts it (AllowFlags), or, for a
//     lingering agent's new job, in the job's request.
//
// See extract.Policy.Grant for what a request beyond the policy does.

// AllowFlags are a receiver's --allow-* flags (serve, agent), and, in JSON,
// the policy of a lingering agent's new job.
type AllowFlags struct {
	Owner  bool `json:"owner,omitempty"`
	Setid  bool `json:"setid,omitempty"`
	Xattrs bool `json:"xattrs,omitempty"`
	ACLs   bool `json:"acls,omitempty"`
	// Devices: character and block devices may be made (-D), where the
	// receiver may (root, CAP_MKNOD). FIFOs and sockets need no leave.
	Devices bool `json:"devices,omitempty"`
}

// policy is the receiver's policy, hint naming how each option is allowed
// on this side (for refusals and notes); nil: not said.
func (a AllowFlags) Policy(hint func(option string) string) extract.Policy {
	return extract.Policy{Owner: a.Owner, Setid: a.Setid, Xattrs: a.Xattrs, ACLs: a.ACLs, Devices: a.Devices, Hint: hint}
}

// args are the flags that give a.
func (a AllowFlags) Args() []string {
	var s []string
	for _, f := range []struct {
		on   bool
		name string
	}{{a.Owner, "--allow-owner"}, {a.Setid, "--allow-setid"}, {a.Xattrs, "--allow-xattrs"}, {a.ACLs, "--allow-acls"}, {a.Devices, "--allow-devices"}} {
		if f.on {
			s = append(s, f.name)
		}
	}
	return s
}

// text is args as a command line's words, each with a space before it.
func (a AllowFlags) Text() string {
	s := ""
	for _, f := range a.Args() {
		s += " " + f
	}
	return s
}

// allowed is what this job's own flags ask the receiver to keep: the
// policy of the agent it starts (a push) or of its own receiver (a pull).
func (j *job) allowed() AllowFlags {
	return AllowFlags{Owner: !j.flags.NoOwner, Setid: j.flags.KeepSetid, Xattrs: j.flags.Faithful.Xattrs, ACLs: j.flags.Faithful.ACLs,
		Devices: j.flags.Faithful.Devices}
}

// pullPolicy is a pull's receiver's policy: the puller's own flags, its
// own --fake-super, and of absolute backup directories its own
// --backup-dir alone (a remote sender may not have DEST's files moved
// elsewhere on this host).
func (j *job) pullPolicy() extract.Policy {
	p := j.allowed().Policy(pullHint)
	p.FakeSuper = j.flags.Faithful.FakeSuper
	if j.flags.Backup.On && filepath.IsAbs(j.flags.Backup.Dir) {
		p.AbsBackupDir = j.flags.Backup.Dir
	}
	return p
}

// pullHint names the puller's flag that allows option.
func pullHint(option string) string {
	switch option {
	case "owner":
		return "a pull without --no-owner"
	case "setid":
		return "a pull with --keep-setid"
	case "xattrs":
		return "a pull with -X"
	case "acls":
		return "a pull with -A"
	case "devices":
		return "a pull with -D"
	}
	return option
}

// warnDenied warns, once, of what the receiver's policy denied this job
// and went on without (its Hello's Denied): owners.
func (j *job) warnDenied(conns []send.Conn) {
	for _, c := range conns {
		c, ok := c.(*send.Client)
		if !ok {
			return
		}
		for _, d := range c.Peer.Denied {
			if d != "owner" {
				continue // nothing else is gone on without; nor printed as the receiver spelt it
			}
			how := "its --allow-owner"
			if j.serveAddr != "" {
				how = "serve --allow-owner"
			}
			termsafe.Errorf(j.stderr, "warning: %s: owners are not kept: the receiver does not allow them (%s); the files belong to the user it runs as", j.dst, how)
		}
		return
	}
}
